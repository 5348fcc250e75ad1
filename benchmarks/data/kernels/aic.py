"""The AIConfigurator tables this project reads, one row per device.

ai-dynamo/aiconfigurator keeps its measured kernel tables under
``aic-core/src/aiconfigurator_core/systems/data/<folder>/``. ``extract_aic_gemm.py`` and
``extract_aic_attention.py`` read them at :data:`COMMIT`; ``benchmarks/fit_gemm.py`` fits the
GEMM files and ``benchmarks/kernels.py`` checks the attention files. Each names its devices
from here.
"""

from __future__ import annotations

from dataclasses import dataclass

COMMIT = "095f58a51c4ca8e61b66ec108d86f223f8d559ce"
#: The serving framework and version of the TensorRT-LLM tables (AIConfigurator's folder).
TRTLLM = "trtllm/1.3.0rc20"
TRTLLM_LABEL = "TensorRT-LLM 1.3.0rc20"


@dataclass(frozen=True)
class AicDevice:
    """One device's tables: where AIConfigurator keeps them, and what this project calls them."""

    folder: str  #: AIConfigurator's ``systems/data`` folder
    device: str  #: the registry's name
    file: str  #: the name in this project's files (``gemm_aic_<file>_<dtype>.csv.gz``)
    recorded: str  #: the device as the collector's ``torch.cuda.get_device_name()`` wrote it
    nvfp4: bool = False  #: a part with fp4 tensor cores (an NVFP4 GEMM table)


#: The devices with TensorRT-LLM 1.3.0rc20 tables (bf16 and fp8 GEMMs, context attention).
TRTLLM_DEVICES = (
    AicDevice("h100_sxm", "H100 SXM", "h100_sxm", "NVIDIA H100 80GB HBM3"),
    AicDevice("h200_sxm", "H200 SXM", "h200_sxm", "NVIDIA H200"),
    AicDevice("l40s", "L40S", "l40s", "NVIDIA L40S"),
    AicDevice("b200_sxm", "B200", "b200", "NVIDIA B200", nvfp4=True),
    AicDevice("gb200", "GB200 (per GPU)", "gb200_per_gpu", "NVIDIA GB200", nvfp4=True),
    AicDevice("b300_sxm", "B300", "b300", "NVIDIA B300 SXM6 AC", nvfp4=True),
    AicDevice("gb300", "GB300 (per GPU)", "gb300_per_gpu", "NVIDIA GB300", nvfp4=True),
)
#: The A100's tables come from other frameworks: a GEMM table from sglang 0.5.10 and a
#: context-attention table from vLLM 0.14.0.
A100 = AicDevice("a100_sxm", "A100 SXM 80GB", "a100_sxm_80gb", "NVIDIA A100-SXM4-80GB")
