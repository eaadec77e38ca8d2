"""A real SLURM cluster on namespace hosts: munged, slurmctld, one slurmd per host.

munged and slurmctld run in the root namespace (slurmctld on the bridge address);
each slurmd runs in its host's network namespace, in a private mount and UTS
namespace (hostname ``<prefix>-node<i>``, a tmpfs with an empty named (``systemd``) cgroup-v1
hierarchy over ``/sys/fs/cgroup``, a hosts file naming every node bind-mounted over
``/etc/hosts``), so batch scripts and ``srun`` tasks run "on" that host.  Everything
lives in a temp folder; ``close()`` stops the daemons and removes it.
Clients find the cluster through ``env()`` (``SLURM_CONF``).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time

__all__ = ["SlurmCluster", "slurm_available"]


def slurm_available() -> str | None:
    for tool in ("slurmctld", "slurmd", "munged", "sbatch", "srun", "scancel"):
        if shutil.which(tool) is None:
            return f"{tool} not found (scripts/setup-multihost-test.sh installs slurm-wlm, munge)"
    if not os.path.exists("/etc/munge/munge.key"):
        return "no /etc/munge/munge.key"
    return None


class SlurmCluster:
    def __init__(self, net, cpus: int = os.cpu_count() or 1) -> None:
        self.net = net
        self.dir = tempfile.mkdtemp(prefix="mcy-slurm-")
        os.chmod(self.dir, 0o755)
        self.procs = []
        self.nodes = [f"{net.prefix}n{i}" for i in range(len(net.names))]
        try:
            self._munge()
            self._conf(cpus)
            self._ctld()
            for i in range(len(self.nodes)):
                self._slurmd(i)
            self._wait_idle()
        except BaseException:
            self.close()
            raise

    def env(self) -> dict:
        e = dict(os.environ)
        e["SLURM_CONF"] = self.conf
        return e

    def _munge(self) -> None:
        d = os.path.join(self.dir, "munge")
        os.mkdir(d, 0o711)
        self.munge_sock = os.path.join(d, "munge.socket")
        p = subprocess.Popen(
            ["munged", "--foreground", "--force", f"--socket={self.munge_sock}",
             "--key-file=/etc/munge/munge.key", f"--pid-file={d}/munged.pid",
             f"--log-file={self.dir}/munged.log", f"--seed-file={d}/seed"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        self.procs.append(p)
        for _ in range(100):
            if os.path.exists(self.munge_sock):
                return
            if p.poll() is not None:
                raise RuntimeError(f"munged failed: {p.stderr.read().decode()}")
            time.sleep(0.02)
        raise RuntimeError("munged did not create its socket")

    def _conf(self, cpus: int) -> None:
        net = self.net
        self.port = 16817 + (os.getpid() % 500) * 2
        lines = [
            "ClusterName=mcytest", f"SlurmctldHost={socket.gethostname()}({net.gateway})",
            "SlurmUser=root", f"SlurmctldPort={self.port}", "SlurmdPort=6818",
            "AuthType=auth/munge", f"AuthInfo=socket={self.munge_sock}",
            f"StateSaveLocation={self.dir}/state", f"SlurmdSpoolDir={self.dir}/spool-%n",
            f"SlurmctldPidFile={self.dir}/slurmctld.pid",
            f"SlurmdPidFile={self.dir}/slurmd-%n.pid",
            f"SlurmctldLogFile={self.dir}/slurmctld.log",
            f"SlurmdLogFile={self.dir}/slurmd-%n.log",
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
            "MailProg=/bin/true", "SchedulerParameters=batch_sched_delay=0",
            "ReturnToService=2", "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "EnforcePartLimits=ALL", "SlurmctldTimeout=10", "SlurmdTimeout=10", "KillWait=2", "MinJobAge=2",
        ]
        for n, ip in zip(self.nodes, net.ips):
            lines.append(f"NodeName={n} NodeAddr={ip} CPUs={cpus} State=UNKNOWN")
        lines.append("PartitionName=mcy Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
        os.mkdir(f"{self.dir}/state")
        self.conf = f"{self.dir}/slurm.conf"
        with open(self.conf, "w") as f:
            f.write("\n".join(lines) + "\n")
        with open(f"{self.dir}/hosts", "w") as f:
            f.write(f"127.0.0.1 localhost\n{net.gateway} {socket.gethostname()}\n")
            for n, ip, hn in zip(self.nodes, net.ips, net.hostnames):
                f.write(f"{ip} {n} {hn}\n")

    def _ctld(self) -> None:
        p = subprocess.Popen(["slurmctld", "-D", "-i", "-f", self.conf],
                             env=self.env(), stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
        self.procs.append(p)
        for _ in range(200):
            if subprocess.run(["scontrol", "ping"], env=self.env(), capture_output=True,
                              text=True).stdout.find("UP") >= 0:
                return
            if p.poll() is not None:
                raise RuntimeError("slurmctld exited; log: " + self._log("slurmctld.log"))
            time.sleep(0.05)
        raise RuntimeError("slurmctld did not answer scontrol ping")

    def _slurmd(self, i: int) -> None:
        net, node = self.net, self.nodes[i]
        os.mkdir(f"{self.dir}/spool-{node}")
        script = (
            "set -e; mount -t tmpfs none /sys/fs/cgroup; mkdir /sys/fs/cgroup/systemd; "
            "mount -t cgroup -o none,name=systemd cgroup /sys/fs/cgroup/systemd; "
            f"mount --bind {self.dir}/hosts /etc/hosts; hostname {net.hostnames[i]}; "
            f"exec slurmd -D -N {node} -f {self.conf}")
        p = subprocess.Popen(
            ["nsenter", f"--net=/run/netns/{net.names[i]}", "--", "unshare", "--mount",
             "--uts", "--", "sh", "-c", script], env=self.env(),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        self.procs.append(p)

    def _wait_idle(self) -> None:
        want = len(self.nodes)
        for _ in range(300):
            out = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %t"], env=self.env(),
                                 capture_output=True, text=True).stdout
            idle = sum(1 for ln in out.splitlines() if ln.split()[-1:] == ["idle"])
            if idle == want:
                return
            time.sleep(0.05)
        raise RuntimeError(f"SLURM nodes not idle: {out!r}; slurmd log: "
                           + self._log(f"slurmd-{self.nodes[0]}.log"))

    def _log(self, name: str) -> str:
        try:
            with open(os.path.join(self.dir, name)) as f:
                return f.read()[-2000:]
        except OSError:
            return "(none)"

    def close(self) -> None:
        for p in reversed(self.procs):
            if p.poll() is None:
                try:
                    os.killpg(p.pid, 15)
                except ProcessLookupError:
                    pass
        for p in reversed(self.procs):
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, 9)
                p.wait(5)
        self.procs = []
        shutil.rmtree(self.dir, ignore_errors=True)
