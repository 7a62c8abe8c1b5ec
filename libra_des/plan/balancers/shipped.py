"""The shipped training balancers, one module each.

Each module declares a :class:`~libra_des.plan.balancers.balancer.TrainingBalancer` (its
pool rule, grouping, Pipeliner use, linear-work tokens, attention planner and, when it reads
knobs of its own, its ``balancer:`` config model). The registry (which names this module)
registers ``SHIPPED`` on its first look-up, in this order (the order the CLI lists them in).
"""

from libra_des.plan.balancers import distca, libra, ulysses, wlb_llm

SHIPPED = (ulysses.BALANCER, wlb_llm.BALANCER, distca.BALANCER, libra.BALANCER,
           wlb_llm.IDEAL, distca.TILES)
