"""RDMA verbs, owned: devices, protection domains, memory regions, RC queue pairs.
"""
