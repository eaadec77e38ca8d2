"""Re-exports only: the ``__module__`` of ``Device``, ``DeviceProperties`` and
``device_count`` (pickles name it), which are defined in :mod:`monarch_cy._gpu._device`.
"""

from monarch_cy._gpu._device import Device, DeviceProperties, device_count

__all__ = ["Device", "DeviceProperties", "device_count"]
