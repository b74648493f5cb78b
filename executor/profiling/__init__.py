"""``executor profile``: measure the real components' per-stage costs into a typed ``Profile``.

One module per measurement suite (``envs``, ``driver``, ``model``, ``sync``; ``executor profile
--comm``'s collectives are ``executor.comm``), the shared fitting (``fit``) and host facts
(``host``); ``run`` assembles the profile.
"""
