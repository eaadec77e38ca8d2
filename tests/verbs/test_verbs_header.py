"""Prove monarch_cy/include/mcy_verbs.h against rdma-core's real <infiniband/verbs.h>.

A C file includes both headers and static-asserts, for every struct the
extension reads or writes, the size and the offset of every field it touches,
plus the enum values and the provider-table slots (``ops.post_send``,
``ops.poll_cq``) that replace verbs.h's inline ``ibv_post_send``/``ibv_poll_cq``.
It also takes the address of every function named in ``mcy_verbs_names``,
so a name verbs.h does not declare fails the build.  Compiling is the test.

Needs gcc and ``libibverbs-dev`` (``scripts/setup-rdma-test.sh`` installs it);
skips with the reason otherwise.  ``MCY_VERBS_INCLUDE`` may point at another
rdma-core include folder (one holding ``infiniband/verbs.h``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HEADER = REPO / "monarch_cy" / "include" / "mcy_verbs.h"
INCLUDE = Path(os.environ.get("MCY_VERBS_INCLUDE", "/usr/include"))

# (real struct, our struct, [fields]) -- fields as C member designators.
LAYOUTS = [
    ("union ibv_gid", "union mcy_ibv_gid", ["raw", "global.subnet_prefix", "global.interface_id"]),
    ("struct ibv_device", "struct mcy_ibv_device",
     ["node_type", "transport_type", "name", "dev_name", "dev_path", "ibdev_path"]),
    ("struct ibv_device_attr", "struct mcy_ibv_device_attr",
     ["fw_ver", "max_mr_size", "vendor_id", "vendor_part_id", "max_qp_wr", "max_sge", "max_cqe",
      "max_qp_rd_atom", "max_qp_init_rd_atom", "atomic_cap", "max_srq_sge", "max_pkeys",
      "local_ca_ack_delay", "phys_port_cnt"]),
    ("struct ibv_context_ops", "struct mcy_ibv_context_ops",
     ["poll_cq", "req_notify_cq", "post_srq_recv", "post_send", "post_recv", "_compat_async_event"]),
    ("struct ibv_context", "struct mcy_ibv_context",
     ["device", "ops", "ops.post_send", "ops.poll_cq", "cmd_fd", "async_fd", "num_comp_vectors",
      "mutex", "abi_compat"]),
    ("struct ibv_pd", "struct mcy_ibv_pd", ["context", "handle"]),
    ("struct ibv_mr", "struct mcy_ibv_mr",
     ["context", "pd", "addr", "length", "handle", "lkey", "rkey"]),
    ("struct ibv_cq", "struct mcy_ibv_cq",
     ["context", "channel", "cq_context", "handle", "cqe", "mutex", "cond",
      "comp_events_completed", "async_events_completed"]),
    ("struct ibv_qp", "struct mcy_ibv_qp",
     ["context", "qp_context", "pd", "send_cq", "recv_cq", "srq", "handle", "qp_num", "state",
      "qp_type", "mutex", "cond", "events_completed"]),
    ("struct ibv_port_attr", "struct mcy_ibv_port_attr",
     ["state", "max_mtu", "active_mtu", "gid_tbl_len", "port_cap_flags", "max_msg_sz",
      "pkey_tbl_len", "lid", "sm_lid", "lmc", "active_width", "active_speed", "phys_state",
      "link_layer", "flags", "port_cap_flags2"]),
    ("struct ibv_wc", "struct mcy_ibv_wc",
     ["wr_id", "status", "opcode", "vendor_err", "byte_len", "imm_data", "qp_num", "src_qp",
      "wc_flags", "pkey_index", "slid", "sl", "dlid_path_bits"]),
    ("struct ibv_sge", "struct mcy_ibv_sge", ["addr", "length", "lkey"]),
    ("struct ibv_send_wr", "struct mcy_ibv_send_wr",
     ["wr_id", "next", "sg_list", "num_sge", "opcode", "send_flags", "imm_data",
      "wr.rdma.remote_addr", "wr.rdma.rkey", "wr.atomic.rkey", "wr.ud.remote_qkey",
      "qp_type.xrc.remote_srqn", ("bind_mw.bind_info.mw_access_flags",
                                  "ext.bind_mw.bind_info.mw_access_flags"),
      ("tso.mss", "ext.tso.mss")]),
    ("struct ibv_qp_cap", "struct mcy_ibv_qp_cap",
     ["max_send_wr", "max_recv_wr", "max_send_sge", "max_recv_sge", "max_inline_data"]),
    ("struct ibv_qp_init_attr", "struct mcy_ibv_qp_init_attr",
     ["qp_context", "send_cq", "recv_cq", "srq", "cap", "qp_type", "sq_sig_all"]),
    ("struct ibv_global_route", "struct mcy_ibv_global_route",
     ["dgid", "flow_label", "sgid_index", "hop_limit", "traffic_class"]),
    ("struct ibv_ah_attr", "struct mcy_ibv_ah_attr",
     ["grh", "dlid", "sl", "src_path_bits", "static_rate", "is_global", "port_num"]),
    ("struct ibv_qp_attr", "struct mcy_ibv_qp_attr",
     ["qp_state", "cur_qp_state", "path_mtu", "path_mig_state", "qkey", "rq_psn", "sq_psn",
      "dest_qp_num", "qp_access_flags", "cap", "ah_attr", "alt_ah_attr", "pkey_index",
      "alt_pkey_index", "en_sqd_async_notify", "sq_draining", "max_rd_atomic",
      "max_dest_rd_atomic", "min_rnr_timer", "port_num", "timeout", "retry_cnt", "rnr_retry",
      "alt_port_num", "alt_timeout", "rate_limit"]),
]


def _our_enums() -> list[str]:
    names = re.findall(r"\b(MCY_(IBV_[A-Z0-9_]+))\s*=", HEADER.read_text())
    return [f"_Static_assert((int){ours} == (int){real}, \"{ours}\");" for ours, real in names]


def _source() -> str:
    lines = ["#include <stddef.h>", "#include <infiniband/verbs.h>", '#include "mcy_verbs.h"', ""]
    for real, ours, fields in LAYOUTS:
        lines.append(f'_Static_assert(sizeof({real}) == sizeof({ours}), "sizeof {real}");')
        for f in fields:
            rf, of = f if isinstance(f, tuple) else (f, f)
            lines.append(
                f'_Static_assert(offsetof({real}, {rf}) == offsetof({ours}, {of}), "{real}.{rf}");')
    lines += _our_enums()
    names = re.search(r"mcy_verbs_names\[\] = \{(.*?)\};", HEADER.read_text(), re.S).group(1)
    funcs = re.findall(r'"(ibv_[a-z_0-9]+)"', names)
    lines.append("void *mcy_proof_symbols[] = {")
    lines += [f"    (void *)&({fn})," for fn in funcs]   # parenthesized: no macro expansion
    lines.append("};")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def compiler():
    cc = os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")
    if not cc:
        pytest.skip("no C compiler (gcc or $CC)")
    if not (INCLUDE / "infiniband" / "verbs.h").exists():
        pytest.skip(f"no {INCLUDE}/infiniband/verbs.h (install libibverbs-dev: "
                    "scripts/setup-rdma-test.sh)")
    return cc


def test_header_matches_real_verbs_h(compiler, tmp_path):
    src = tmp_path / "proof.c"
    src.write_text(_source())
    r = subprocess.run([compiler, "-std=gnu11", "-Wall", "-Werror", "-Wno-unused-function",
                        "-I", str(INCLUDE), "-I", str(HEADER.parent), "-c", str(src),
                        "-o", str(tmp_path / "proof.o")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"mcy_verbs.h disagrees with verbs.h:\n{r.stderr[-4000:]}"


def test_proof_covers_every_field_and_name(compiler):
    """The proof is not vacuous: it asserts many offsets, every enum and every symbol."""
    src = _source()
    assert src.count("offsetof(") >= 2 * 150
    assert len(_our_enums()) >= 35
    assert src.count("(void *)&(ibv_") == 18


def test_a_wrong_layout_fails_the_proof(compiler, tmp_path):
    """Flip one declaration and the same compile must fail (the proof can detect errors)."""
    bad_inc = tmp_path / "inc"
    bad_inc.mkdir()
    text = HEADER.read_text().replace("    uint32_t lkey;\n    uint32_t rkey;\n",
                                      "    uint32_t rkey;\n    uint32_t lkey;\n", 1)
    assert text != HEADER.read_text()
    (bad_inc / "mcy_verbs.h").write_text(text)
    src = tmp_path / "proof.c"
    src.write_text(_source())
    r = subprocess.run([compiler, "-std=gnu11", "-I", str(INCLUDE), "-I", str(bad_inc), "-c",
                        str(src), "-o", str(tmp_path / "proof.o")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "struct ibv_mr.lkey" in r.stderr
