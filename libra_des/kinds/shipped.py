"""The shipped scenario kinds, in the config's order (``SCENARIO_KINDS``); the kind registry
(:mod:`libra_des.kinds`) registers ``SHIPPED`` on its first look-up."""

from libra_des.kinds import moe, training

SHIPPED = (training.KIND, moe.KIND)
