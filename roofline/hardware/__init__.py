"""Hardware specs: datasheet peaks of accelerators and CPUs, and a registry to look them up.

Examples
--------
>>> from roofline.hardware import get_device
>>> h100 = get_device("NVIDIA H100 80GB HBM3")
>>> h100.peak_flops_per_s("bf16") / 1e12
989.4
>>> round(h100.ridge_point("bf16"))
295
"""

from roofline.hardware.calibration import calibrate
from roofline.hardware.engines import Engine
from roofline.hardware.registry import (
    AmbiguousDeviceError,
    DeviceFileWarning,
    UnknownDeviceError,
    get_device,
    list_devices,
    load_device,
    register_device,
)
from roofline.hardware.spec import (
    Achievable,
    DeviceSpec,
    DeviceSpecError,
    HostLink,
    Interconnect,
    Measured,
)

__all__ = [
    "Achievable",
    "AmbiguousDeviceError",
    "DeviceFileWarning",
    "DeviceSpec",
    "DeviceSpecError",
    "Engine",
    "HostLink",
    "Interconnect",
    "Measured",
    "UnknownDeviceError",
    "calibrate",
    "get_device",
    "list_devices",
    "load_device",
    "register_device",
]
