"""How fast an HPA may move its target: stabilization windows, scaling policies, and the history they read.

After Kubernetes' pkg/controller/podautoscaler/horizontal.go (normalizeDesiredReplicas,
normalizeDesiredReplicasWithBehaviors, stabilizeRecommendation[WithBehaviors],
convertDesiredReplicasWithRules / WithBehaviorRate, storeScaleEvent) and
pkg/apis/autoscaling/v2/defaults.go (GenerateHPAScaleUpRules / ScaleDownRules). Called by
the HorizontalPodAutoscaler controller (controller.py) once per reconcile with the replica
count the metrics propose; it returns the count to set and the AbleToScale / ScalingLimited
reasons to record.

- An HPA without `spec.behavior` takes Kubernetes' original path: the highest recommendation
  of the last `--horizontal-pod-autoscaler-downscale-stabilization` (300 s), then at most
  max(2 x current, 4) on a scale-up, within min/max.
- An HPA with `spec.behavior` gets the defaults for what it leaves out: scaleUp stabilization
  0 s, policies Pods 4 / 15 s and Percent 100 / 15 s, selectPolicy Max; scaleDown stabilization
  the flag's window, policy Percent 100 / 15 s, selectPolicy Max. Recommendations are
  stabilized between the lowest of the scale-up window and the highest of the scale-down
  window, then limited by the policies over the scale events of each policy's period
  (selectPolicy Max: the largest change allowed, Min: the smallest, Disabled: none).

`History` is the controller's memory of recommendations and scale events per HPA key (kept in
the process, as Kubernetes keeps it: a restarted controller starts a fresh window). Times are
epoch seconds from the controller's clock, so tests drive it with a fake clock.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field

#: the scale-up limit of an HPA without behavior: max(SCALE_UP_FACTOR x current, SCALE_UP_MINIMUM)
SCALE_UP_FACTOR = 2.0
SCALE_UP_MINIMUM = 4.0


@dataclass(frozen=True)
class ScalingPolicy:
    """One HPAScalingPolicy: change by at most `value` Pods or Percent within `period_seconds`."""

    type: str
    value: int
    period_seconds: int


@dataclass(frozen=True)
class ScalingRules:
    """One direction's HPAScalingRules, every field filled (the defaults for what the spec leaves out)."""

    stabilization_window_seconds: int
    select_policy: str = "Max"
    policies: tuple[ScalingPolicy, ...] = ()


@dataclass(frozen=True)
class Behavior:
    """spec.behavior with the defaults applied (GenerateHPAScaleUpRules / ScaleDownRules)."""

    scale_up: ScalingRules
    scale_down: ScalingRules


DEFAULT_SCALE_UP = ScalingRules(0, "Max", (ScalingPolicy("Pods", 4, 15), ScalingPolicy("Percent", 100, 15)))
#: scale-down's default window is the controller's --horizontal-pod-autoscaler-downscale-stabilization
DEFAULT_SCALE_DOWN_POLICIES = (ScalingPolicy("Percent", 100, 15),)


def _rules(spec: dict | None, *, window: int, policies: tuple[ScalingPolicy, ...]) -> ScalingRules:
    spec = spec if isinstance(spec, dict) else {}
    if spec.get("stabilizationWindowSeconds") is not None:
        window = int(spec["stabilizationWindowSeconds"])
    if spec.get("policies") is not None:
        policies = tuple(ScalingPolicy(str(p.get("type")), int(p.get("value") or 0), int(p.get("periodSeconds") or 0))
                         for p in spec["policies"] if isinstance(p, dict))
    return ScalingRules(window, str(spec.get("selectPolicy") or "Max"), policies)


def behavior_of(hpa: dict, *, downscale_stabilization: float) -> Behavior | None:
    """The HPA's behavior with defaults filled in; None when it has none (Kubernetes' behavior-less path)."""
    given = (hpa.get("spec") or {}).get("behavior")
    if given is None:
        return None
    given = given if isinstance(given, dict) else {}
    return Behavior(
        scale_up=_rules(given.get("scaleUp"), window=DEFAULT_SCALE_UP.stabilization_window_seconds,
                        policies=DEFAULT_SCALE_UP.policies),
        scale_down=_rules(given.get("scaleDown"), window=int(downscale_stabilization),
                          policies=DEFAULT_SCALE_DOWN_POLICIES))


@dataclass
class Recommendation:
    """timestampedRecommendation: what the metrics proposed, and when."""

    replicas: int
    at: float


@dataclass
class ScaleEvent:
    """timestampedScaleEvent: a rescale's change in replicas, when, and whether it fell out of every period."""

    change: int
    at: float
    outdated: bool = False


@dataclass
class History:
    """Per HPA key: the recent recommendations and the scale-up and scale-down events (thread-safe)."""

    recommendations: dict[str, list[Recommendation]] = field(default_factory=dict)
    scale_up_events: dict[str, list[ScaleEvent]] = field(default_factory=dict)
    scale_down_events: dict[str, list[ScaleEvent]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def record_initial(self, key: str, current: int, now: float) -> None:
        """recordInitialRecommendation: the target's current count is the first recommendation."""
        with self.lock:
            self.recommendations.setdefault(key, [Recommendation(current, now)])

    def forget(self, key: str) -> None:
        """The HPA is gone: drop its history."""
        with self.lock:
            for table in (self.recommendations, self.scale_up_events, self.scale_down_events):
                table.pop(key, None)

    def _record(self, key: str, replicas: int, now: float, old_index: int | None) -> None:
        entry = Recommendation(replicas, now)
        if old_index is not None:
            self.recommendations[key][old_index] = entry
        else:
            self.recommendations.setdefault(key, []).append(entry)

    def stabilize(self, key: str, desired: int, now: float, window: float) -> int:
        """stabilizeRecommendation: the highest recommendation of the last `window` seconds (desired included)."""
        cutoff = now - window
        best, old = desired, None
        with self.lock:
            for i, rec in enumerate(self.recommendations.get(key, ())):
                if rec.at < cutoff:
                    old = i
                elif rec.replicas > best:
                    best = rec.replicas
            self._record(key, desired, now, old)
        return best

    def stabilize_with_behaviors(self, key: str, current: int, desired: int, behavior: Behavior,
                                 now: float) -> tuple[int, str, str]:
        """stabilizeRecommendationWithBehaviors: (stabilized count, AbleToScale reason, message)."""
        up_cutoff = now - behavior.scale_up.stabilization_window_seconds
        down_cutoff = now - behavior.scale_down.stabilization_window_seconds
        up, down, old = desired, desired, None
        with self.lock:
            for i, rec in enumerate(self.recommendations.get(key, ())):
                if rec.at > up_cutoff:
                    up = min(rec.replicas, up)
                if rec.at > down_cutoff:
                    down = max(rec.replicas, down)
                if rec.at < up_cutoff and rec.at < down_cutoff:
                    old = i
            self._record(key, desired, now, old)
        recommendation = max(current, up)
        recommendation = min(recommendation, down)
        if desired >= current:
            return (recommendation, "ScaleUpStabilized",
                    "recent recommendations were lower than current one, applying the lowest recent recommendation")
        return (recommendation, "ScaleDownStabilized",
                "recent recommendations were higher than current one, applying the highest recent recommendation")

    def store_scale_event(self, key: str, behavior: Behavior | None, previous: int, new: int, now: float) -> None:
        """storeScaleEvent: remember a rescale for the policies' periods (nothing without a behavior)."""
        if behavior is None or new == previous:
            return
        up = new > previous
        rules = behavior.scale_up if up else behavior.scale_down
        table = self.scale_up_events if up else self.scale_down_events
        longest = max((p.period_seconds for p in rules.policies), default=0)
        with self.lock:
            events = table.setdefault(key, [])
            old = None
            for i, event in enumerate(events):
                if event.at < now - longest:
                    event.outdated = True
                if event.outdated:
                    old = i
            entry = ScaleEvent(abs(new - previous), now)
            if old is not None:
                events[old] = entry
            else:
                events.append(entry)

    def _change_in_period(self, events: list[ScaleEvent], period: int, now: float) -> int:
        """getReplicasChangePerPeriod: replicas added (or removed) by the events of the last `period` seconds."""
        cutoff = now - period
        return sum(e.change for e in events if e.at > cutoff)

    def scale_up_limit(self, key: str, current: int, rules: ScalingRules, now: float) -> int:
        """calculateScaleUpLimitWithScalingRules: the most replicas the policies allow now."""
        return self._limit(key, current, rules, now, up=True)

    def scale_down_limit(self, key: str, current: int, rules: ScalingRules, now: float) -> int:
        """calculateScaleDownLimitWithBehaviors: the fewest replicas the policies allow now."""
        return self._limit(key, current, rules, now, up=False)

    def _limit(self, key: str, current: int, rules: ScalingRules, now: float, *, up: bool) -> int:
        """Each policy's bound from the replicas at its period's start; selectPolicy Max picks the loosest
        (the most when scaling up, the fewest when scaling down), Min the tightest."""
        if rules.select_policy == "Disabled":
            return current
        with self.lock:
            ups, downs = list(self.scale_up_events.get(key, ())), list(self.scale_down_events.get(key, ()))
        proposals = []
        for policy in rules.policies:
            start = current - self._change_in_period(ups, policy.period_seconds, now) \
                + self._change_in_period(downs, policy.period_seconds, now)
            if policy.type == "Pods":
                proposals.append(start + policy.value if up else start - policy.value)
            elif policy.type == "Percent":
                proposals.append(math.ceil(start * (1 + policy.value / 100)) if up
                                 else int(start * (1 - policy.value / 100)))
        if not proposals:
            return current
        loosest = max if up else min
        tightest = min if up else max
        return tightest(proposals) if rules.select_policy == "Min" else loosest(proposals)

@dataclass(frozen=True)
class Normalized:
    """The count to set, and the AbleToScale (True) and ScalingLimited conditions' reasons and messages."""

    replicas: int
    able_reason: str
    able_message: str
    limited: bool
    limited_reason: str
    limited_message: str


READY_FOR_NEW_SCALE = ("ReadyForNewScale", "recommended size matches current size")
WITHIN_RANGE = ("DesiredWithinRange", "the desired count is within the acceptable range")
TOO_FEW = ("TooFewReplicas", "the desired replica count is less than the minimum replica count")
TOO_MANY = ("TooManyReplicas", "the desired replica count is more than the maximum replica count")
SCALE_UP_LIMIT = ("ScaleUpLimit", "the desired replica count is increasing faster than the maximum scale rate")
SCALE_DOWN_LIMIT = ("ScaleDownLimit", "the desired replica count is decreasing faster than the maximum scale rate")


def _with_rules(current: int, desired: int, min_replicas: int, max_replicas: int) -> tuple[int, tuple[str, str]]:
    """convertDesiredReplicasWithRules (no behavior): within [min, min(max, max(2 x current, 4))]."""
    limit = int(max(SCALE_UP_FACTOR * current, SCALE_UP_MINIMUM))
    if max_replicas > limit:
        maximum, limiting = limit, SCALE_UP_LIMIT
    else:
        maximum, limiting = max_replicas, TOO_MANY
    if desired < min_replicas:
        return min_replicas, TOO_FEW
    if desired > maximum:
        return maximum, limiting
    return desired, WITHIN_RANGE


def _with_behavior_rate(history: History, key: str, current: int, desired: int, min_replicas: int,
                        max_replicas: int, behavior: Behavior, now: float) -> tuple[int, tuple[str, str]]:
    """convertDesiredReplicasWithBehaviorRate: within [min, max] and what the policies allow now."""
    if desired > current:
        limit = max(history.scale_up_limit(key, current, behavior.scale_up, now), current)
        if max_replicas > limit:
            maximum, limiting = limit, SCALE_UP_LIMIT
        else:
            maximum, limiting = max_replicas, TOO_MANY
        if desired > maximum:
            return maximum, limiting
    elif desired < current:
        limit = min(history.scale_down_limit(key, current, behavior.scale_down, now), current)
        if min_replicas < limit:
            minimum, limiting = limit, SCALE_DOWN_LIMIT
        else:
            minimum, limiting = min_replicas, TOO_FEW
        if desired < minimum:
            return minimum, limiting
    return desired, WITHIN_RANGE


def normalize(history: History, key: str, *, current: int, desired: int, min_replicas: int, max_replicas: int,
              behavior: Behavior | None, downscale_stabilization: float, now: float) -> Normalized:
    """normalizeDesiredReplicas[WithBehaviors]: the count to set after stabilization and the scaling limits."""
    if behavior is None:
        stabilized = history.stabilize(key, desired, now, downscale_stabilization)
        able = READY_FOR_NEW_SCALE if stabilized == desired else (
            "ScaleDownStabilized",
            "recent recommendations were higher than current one, applying the highest recent recommendation")
        replicas, limiting = _with_rules(current, stabilized, min_replicas, max_replicas)
    else:
        stabilized, reason, message = history.stabilize_with_behaviors(key, current, desired, behavior, now)
        able = READY_FOR_NEW_SCALE if stabilized == desired else (reason, message)
        replicas, limiting = _with_behavior_rate(history, key, current, stabilized, min_replicas, max_replicas,
                                                 behavior, now)
    return Normalized(replicas, able[0], able[1], replicas != stabilized, limiting[0], limiting[1])


__all__ = ["Behavior", "DEFAULT_SCALE_DOWN_POLICIES", "DEFAULT_SCALE_UP", "History", "Normalized", "Recommendation",
           "ScaleEvent", "ScalingPolicy", "ScalingRules", "behavior_of", "normalize"]
