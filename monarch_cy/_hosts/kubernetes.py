"""``KubernetesJob``: hosts from a Kubernetes manifest (not runnable on our CI).

The manifest (``deploy/k8s/monarch-cy.yaml``) holds a StatefulSet of agent pods,
each running ``python -m monarch_cy._hosts.agent --connect
tcp://<controller service>:<port> --once``, a Service naming the controller pod, and
a Secret with the job secret, mounted as a file in every pod.  This job type reads
from the manifest the StatefulSet's ``replicas`` (the number of hosts) and the
controller Service's port, listens there, and waits for that many agents to dial in,
ordered by their pod index (``MONARCH_CY_AGENT_RANK`` from the
``apps.kubernetes.io/pod-index`` label).  ``apply()`` does not call ``kubectl``:
apply the manifest yourself (the controller runs inside it); ``kill()`` only says
goodbye to the agents, which exit (``--once``); delete the manifest's objects
with ``kubectl delete -f``.

YAML manifests need PyYAML; a JSON manifest (a list of objects, or a ``List``)
needs nothing.
"""

from __future__ import annotations

import json

from monarch_cy._hosts.job import JobState, JobTrait, check_meshes, split_meshes

__all__ = ["KubernetesJob", "load_manifest", "read_hosts"]


def load_manifest(path: str) -> list:
    """The objects of a manifest file (YAML with PyYAML, or JSON)."""
    with open(path) as f:
        text = f.read()
    try:
        data = json.loads(text)
    except ValueError:
        try:
            import yaml
        except ImportError:
            raise ValueError(f"{path!r} is YAML: install PyYAML, or give the manifest "
                             "as JSON") from None
        return [d for d in yaml.safe_load_all(text) if d]
    if isinstance(data, dict):
        return list(data.get("items", [data]))
    return list(data)


def read_hosts(objs: list, agents: str | None = None,
               service: str | None = None) -> tuple[int, int]:
    """``(replicas, port)``: the agent StatefulSet's replicas and the controller
    Service's port (objects chosen by name when given, else the only one)."""
    def pick(kind, name):
        found = [o for o in objs if o.get("kind") == kind and
                 (name is None or o.get("metadata", {}).get("name") == name)]
        if len(found) != 1:
            raise ValueError(f"the manifest must hold exactly one {kind}"
                             + (f" named {name!r}" if name else "")
                             + f"; found {len(found)}")
        return found[0]
    sts = pick("StatefulSet", agents)
    svc = pick("Service", service)
    replicas = int(sts.get("spec", {}).get("replicas", 1))
    ports = svc.get("spec", {}).get("ports", [])
    if not ports:
        raise ValueError(f"Service {svc['metadata'].get('name')!r} has no port")
    return replicas, int(ports[0].get("targetPort", ports[0]["port"]))


class KubernetesJob(JobTrait):
    """Hosts from the agents of a manifest (module docstring).  ``meshes``: name ->
    number of hosts (default: one mesh ``hosts`` with every replica)."""

    def __init__(self, manifest: str, meshes: dict | None = None, *,
                 agents: str | None = None, service: str | None = None,
                 start_timeout: float = 600.0) -> None:
        self.replicas, self.port = read_hosts(load_manifest(manifest), agents, service)
        self.meshes = check_meshes(meshes or {"hosts": self.replicas})
        if sum(self.meshes.values()) != self.replicas:
            raise ValueError(f"meshes ask for {sum(self.meshes.values())} hosts but the "
                             f"manifest starts {self.replicas} agents")
        self.start_timeout = start_timeout
        self._dialin = None
        self._state = None

    def apply(self) -> None:
        """Listen for the agents on the Service's port (the manifest is applied by
        ``kubectl``); the pod's address comes from ``MONARCH_CY_HOST`` (or
        ``MONARCH_CY_CONTROLLER_INTERFACE``)."""
        if self._dialin is not None:
            return
        from monarch_cy._hosts.attach import configured_ip, ensure_controller_node, get_hub
        from monarch_cy._transport.secret import load_secret
        node = ensure_controller_node(None, load_secret(),
                                      host=configured_ip())
        hub = get_hub(node)
        self._dialin = hub.dialin or hub.listen(f"tcp://0.0.0.0:{self.port}")

    def state(self, timeout: float | None = None) -> JobState:
        self._start_telemetry()
        if self._state is None:
            self.apply()
            hosts = self._dialin.wait(self.replicas, timeout or self.start_timeout)
            self._state = split_meshes(self.meshes, hosts)
        return self._state

    @property
    def active(self) -> bool:
        """True from ``apply()`` until ``kill()``."""
        return self._dialin is not None and not self._killed

    _killed = False

    def kill(self) -> None:
        self._killed = True
        from monarch_cy._hosts import attach
        if attach._hub is not None:
            from monarch_cy._hosts import protocol as P
            hub = attach._hub
            for h in (self._state and [h for m in self._state for h in
                                       self._state[m]._hosts.hosts]) or []:
                hub.command(lambda h=h: hub.send(h, (P.BYE,)))
