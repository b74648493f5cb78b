"""``perfmodel sweep``: predict every mode x GPU count x ratio x knob combination
(perfmodel.planning.sweep); ``sweep`` is what the command line and a Python caller run."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable

from perfmodel.commands.common import Say, fail, node_options
from perfmodel.commands.planning import check_common, load_profile_of, parse_list, profile_ref, rlinf_base, sweep_spec


def sweep(gpus: str | None = None, *, backbone: str | None = None, profile_path: str | None = None,
          modes: str | None = None, ratios: str | None = None, pipeline_stages: str | None = None,
          b_max: str | None = None, t_max: str | None = None, staleness: int | str | None = None,
          price: float | None = None, replications: int = 1, seed: int = 0, jobs: int | None = None,
          rlinf_config: str | None = None, gpu: str | None = None, scale_global_batch: bool = False,
          out: str | None = None, csv_out: str | None = None, address: str | None = None, interval: bool = True,
          progress: Callable[[int, int], None] | None = None, say: Say | None = None,
          cpu_cores_per_node: int | None = None, gpus_per_node: int | None = None,
          nic_gbps: float | None = None, node_ram_gb: float | None = None, envs_per_gpu: str | None = None,
          micro_batch_sizes: str | None = None) -> dict[str, Any]:
    """The sweep document (``perfmodel sweep --json``; the list options are comma-separated text
    as on the command line), written to ``out`` (JSON) and ``csv_out`` when given."""
    from perfmodel.cliutil import check_outputs_apart, check_writable
    from perfmodel.planning.sweep import run_sweep, write_csv_atomic
    from perfmodel.schema.jsonio import write_json_atomic

    counts = parse_list("--gpus", gpus, int, "integers >= 1")
    check_common(jobs, price, replications, seed)
    check_outputs_apart({"--profile": profile_path, "--rlinf-config": rlinf_config}, {"--out": out, "--csv": csv_out})
    check_writable("--out", out)
    check_writable("--csv", csv_out)
    node = node_options(cpu_cores_per_node, gpus_per_node, nic_gbps, node_ram_gb)
    ref, base, pipeline_stages, _ = rlinf_base(rlinf_config, backbone, profile_path, gpu, pipeline_stages, modes, say,
                                               node)
    spec = sweep_spec(ref or profile_ref(backbone, profile_path), modes, counts, ratios, pipeline_stages, b_max, t_max,
                      price, replications, seed, staleness, base, gpu, scale_global_batch, node, envs_per_gpu,
                      micro_batch_sizes)
    if not interval:
        spec = replace(spec, intervals=False)
    _, profile = load_profile_of(None, ref) if ref else load_profile_of(backbone, profile_path)
    doc = run_sweep(spec, profile, jobs=jobs, progress=progress, address=address)
    try:
        if out:
            write_json_atomic(out, doc)
        if csv_out:
            write_csv_atomic(csv_out, doc)
    except OSError as e:
        fail("--out" if out else "--csv", f"must be a writable path; {e.strerror}: {e.filename}")
    return doc
