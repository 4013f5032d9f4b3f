"""Application Auto Scaling as the local AWS emulates it beyond moto's model (which stores targets
and policies and scales nothing): the alarms a target tracking policy makes, policies run by
their alarms with their cooldowns, the capacity they set within the target's bounds through the
service that owns it (:mod:`.targets`), and the scaling activities that record it all
(:mod:`.policies`). The state is moto's backends' (policies and targets carry their cooldowns,
the backend its activities), reset with them; ``local_aws/patches/applicationautoscaling.py``
wires it in."""

from local_aws.applicationautoscaling.policies import activities, bound_capacity, execute, make_alarms

__all__ = ["activities", "bound_capacity", "execute", "make_alarms"]
