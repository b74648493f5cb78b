"""Every LIBERO config RLinf and the RL-VLA3 fork ship, as the importer reads it: imported (the
plan's mode, rollout, backbone and GPUs) or refused (the key and why), as the tables of
docs/formats.md and docs/backbones.md (written between their markers by ``--write``; checked
by tests/test_rlinf.py, so they cannot go stale).

    python -m perfmodel.rlinf.catalogue [--write]

The configs are ../shared/reference/rlinf-configs/*.yaml (RLinf's layout) and
../shared/reference/rl-vla3-fork/config/libero/*.yaml (the fork's, composed with EMBODIED_PATH
set to the fork's folder, as its scripts set it).
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from perfmodel.rlinf.importer import load_rlinf
from perfmodel.schema.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
# CI keeps shared/ beside the clone; a worktree under /work/wN/ has it one level up too.
REFERENCE = next((p / "shared" / "reference" for p in (ROOT.parent, ROOT.parent.parent)
                  if (p / "shared" / "reference").is_dir()), ROOT.parent / "shared" / "reference")
DOCS = {"formats": ROOT / "docs" / "formats.md", "backbones": ROOT / "docs" / "backbones.md"}
BEGIN, END = "<!-- rlinf-configs: begin (python -m perfmodel.rlinf.catalogue --write) -->", "<!-- rlinf-configs: end -->"


@dataclass(frozen=True)
class Row:
    source: str  # "RLinf" or "RL-VLA3 fork"
    name: str
    backbone: str | None  # None: refused
    reading: str  # the plan as imported, or "`key`: why"

    @property
    def imported(self) -> bool:
        return self.backbone is not None


@contextmanager
def embodied_path_set(path: Path | None) -> Iterator[None]:
    old = os.environ.get("EMBODIED_PATH")
    if path is not None:
        os.environ["EMBODIED_PATH"] = str(path)
    try:
        yield
    finally:
        if path is not None:
            if old is None:
                os.environ.pop("EMBODIED_PATH", None)
            else:
                os.environ["EMBODIED_PATH"] = old


def read_config(path: Path, source: str, embodied: Path | None = None) -> Row:
    """How the importer reads one config."""
    with embodied_path_set(embodied):
        try:
            im = load_rlinf(path)
        except ConfigError as e:
            why = e.message.replace(str(path.parent) + "/", "").replace(str(path.parent), ".")
            return Row(source, path.name, None, f"`{e.field}`: {why}")
    p, m = im.plan, im.plan.mechanisms
    if m.disaggregated:
        where = f"rollout:actor {p.allocation_ratio}"
    elif p.rollout_gpus < p.actor_gpus:  # colocated_rollout_gpus
        where = f"rollout on {p.rollout_gpus} of the {p.actor_gpus} GPUs"
    else:
        where = "shared GPUs"
    parts = [f"{p.mode} ({where})", f"rollout {p.rollout_kind}"]
    if m.async_training:
        parts.append(f"staleness {p.max_staleness}")
    parts.append(f"{p.cluster.gpus} GPUs, {p.workload.total_num_envs} envs, {p.pipeline_stage_num} stage(s)")
    parts.append(p.workload.algorithm)
    return Row(source, path.name, im.backbone, ", ".join(parts))


def rows(reference: Path = REFERENCE) -> list[Row]:
    """Every config, RLinf's then the fork's, in name order (empty where a folder is missing)."""
    rlinf = sorted((reference / "rlinf-configs").glob("*.yaml"))
    fork_root = reference / "rl-vla3-fork"
    fork = sorted((fork_root / "config" / "libero").glob("*.yaml"))
    return ([read_config(p, "RLinf") for p in rlinf]
            + [read_config(p, "RL-VLA3 fork", embodied=fork_root) for p in fork])


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def table(all_rows: list[Row], kind: str) -> str:
    """The markdown block for docs/<kind>.md: formats, every config's reading; backbones, the
    model each names and the backbone it is costed as."""
    out = [BEGIN, ""]
    for source in ("RLinf", "RL-VLA3 fork"):
        mine = [r for r in all_rows if r.source == source]
        if not mine:
            continue
        n = sum(r.imported for r in mine)
        out.append(f"{source}: {n} of {len(mine)} LIBERO configs import and predict.")
        out.append("")
        if kind == "formats":
            out += ["| config | imported as, or refused: the key and why |", "|---|---|"]
            out += [f"| `{r.name}` | {_cell(r.reading if r.imported else 'refused: ' + r.reading)} |" for r in mine]
        else:
            out += ["| config | backbone costed, or refused: the key and why |", "|---|---|"]
            out += [f"| `{r.name}` | {_cell(r.backbone if r.backbone else 'refused: ' + r.reading)} |" for r in mine]
        out.append("")
    out.append(END)
    return "\n".join(out)


def with_table(doc: str, block: str) -> str:
    """``doc`` with its block between the markers replaced by ``block``."""
    start, end = doc.index(BEGIN), doc.index(END) + len(END)
    return doc[:start] + block + doc[end:]


def main(argv: list[str]) -> int:
    found = rows()
    if not found:
        print(f"error: no configs under {REFERENCE}", file=sys.stderr)
        return 2
    for kind, path in DOCS.items():
        block = table(found, kind)
        if "--write" in argv:
            path.write_text(with_table(path.read_text(), block))
        else:
            print(block)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
