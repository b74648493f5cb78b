from perfmodel.calibration.reference import published_plan
from perfmodel.schema.profile import load_profile
from perfmodel.prediction import predict
for b in ("pi05","gr00t_n15"):
    prof=load_profile(b)
    for m in ("colocated","disaggregated","train_async","rollout_async","streamer"):
      for g in (16,32,64):
        pl=published_plan(prof,m,g,None if m=="colocated" else "1:1",max_staleness=1)
        p=predict(pl,prof); iv=p["throughput_interval"]
        print(b,m,g,f"{p['throughput_env_steps_per_s']:.2f} ({iv['low']:.2f}..{iv['high']:.2f})")
