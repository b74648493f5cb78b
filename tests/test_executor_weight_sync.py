"""Weight sync actor -> generator carries a version; stale versions are refused."""

import os

import torch
import torch.multiprocessing as tmp

from executor.learner import free_port, init_distributed
from executor.policies import make_policy
from executor.weight_sync import WeightPublisher, WeightReceiver, broadcast_weights

# one intra-op thread: OpenMP workers spin badly when another process holds a core
torch.set_num_threads(1)


def _flat(m):
    return torch.cat([p.detach().reshape(-1) for p in m.parameters()])


def test_sync_moves_version_and_weights():
    actor, gen = make_policy("gr00t_n15", "tiny", seed=0), make_policy("gr00t_n15", "tiny", seed=1)
    pub, recv = WeightPublisher(actor), WeightReceiver(gen)
    assert not torch.equal(_flat(actor), _flat(gen))
    w1 = pub.publish()
    assert w1.version == 1 and w1.nbytes == actor.weight_bytes()
    assert recv.load(w1) and recv.version == 1
    assert torch.equal(_flat(actor), _flat(gen))
    with torch.no_grad():
        actor.log_std.add_(0.5)
    w2 = pub.publish()
    assert recv.load(w2) and recv.version == 2 and recv.bytes_received == 2 * w1.nbytes
    assert not recv.load(w1) and recv.version == 2  # stale version refused
    assert torch.equal(_flat(actor), _flat(gen))


def _bcast_rank(rank, port, q):
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    torch.set_num_threads(1)
    init_distributed(rank, 2, "gloo")
    policy = make_policy("pi05", "tiny", seed=rank)
    version, nbytes, seconds = broadcast_weights(policy, version=7 if rank == 0 else 0, src=0)
    ref = make_policy("pi05", "tiny", seed=0)
    q.put((rank, version, nbytes, seconds, bool(torch.equal(_flat(policy), _flat(ref)))))
    import torch.distributed as dist

    dist.destroy_process_group()


def test_broadcast_weights_over_gloo():
    ctx = tmp.get_context("spawn")
    q = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=_bcast_rank, args=(r, port, q)) for r in range(2)]
    for p in procs:
        p.start()
    res = sorted(q.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(timeout=30)
    nbytes = make_policy("pi05", "tiny").weight_bytes()
    for rank, version, nb, seconds, equal in res:
        assert version == 7 and nb == nbytes and seconds > 0 and equal
