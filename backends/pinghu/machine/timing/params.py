"""The cycle model's numbers, derived from the machine file (:mod:`mutile.machines`):
latency per ISA latency class, initiation interval per pipe, per-MP and device rates, and
the peaks the profiler reports against. Nothing here is a number of its own."""
from __future__ import annotations

import mutile.machines as machines

# The pipes a warp-instruction occupies on its scheduler (per-warp initiation interval),
# by latency class; the unit name is the utilization key it counts toward.
PIPE_OF_CLASS = {"alu": "alu", "alu64": "alu64", "fp64": "fp64", "imul": "imul", "div": "div",
                 "sfu": "sfu", "cvt": "cvt", "shfl": "shfl", "s2r": "s2r", "bar": "bar",
                 "control": "control", "atom_global": "atom", "tme": "tme",
                 "async_bar": "async_bar", "fence": "fence", "debug": "debug", "wmma": "wmma",
                 "sqmma": "alu", "ld_global": "lsu", "st_global": "lsu", "ld_shared": "lsu",
                 "st_shared": "lsu", "ld_local": "lsu", "st_local": "lsu"}
UNIT_OF_CLASS = {"alu": "ALU", "alu64": "ALU", "fp64": "ALU", "imul": "ALU", "div": "ALU",
                 "sfu": "SFU", "cvt": "ALU"}
# MMA operand types of the SQMMA rows -> the rate key of the machine file
SQMMA_DTYPE = {"E4M3": "e4m3", "E5M2": "e5m2", "S8": "s8", "U8": "s8", "F16": "f16",
               "BF16": "bf16", "TF32": "tf32"}
# Demand rows: MP-wide resources (cycles of the MP) and device-wide ones (cycles of HBM, L2).
MP_UNITS = ("ISSUE", "ALU", "SFU", "LSU", "SHARED", "TME", "SQMMA", "WMMA")
DEVICE_UNITS = ("L2", "HBM")
DEMAND = MP_UNITS + DEVICE_UNITS
D = {u: i for i, u in enumerate(DEMAND)}


def pipe_key(cls: str) -> str:
    """The pipe instructions of latency class ``cls`` occupy."""
    return PIPE_OF_CLASS.get(cls, "alu")


class Timing:
    """The numbers of one machine file, in cycles and bytes per cycle."""

    def __init__(self, mf=None):
        """``mf``: a MachineFile or a path (None: ``MUTILE_MACHINE``, else the default)."""
        mf = machines.current(mf)
        v = mf.value
        self.file = mf
        self.clock_hz = float(v("device", "clock_hz"))
        self.mp_count = int(v("device", "mp_count"))
        self.subcores = int(v("device", "subcores"))
        self.issue_per_cycle = self.subcores * int(v("device", "issue_per_subcore"))
        self.latency = {k: float(x) for k, x in v("latency", "cycles").items()}
        self.ii = {k: float(x) for k, x in v("rates", "ii").items()}
        self.sqmma_rate = {k: float(x) for k, x in v("rates", "sqmma_flops_per_cycle").items()}
        self.wmma_rate = float(v("rates", "wmma_flops_per_cycle"))
        self.hbm_latency = float(v("memory", "hbm_latency"))
        self.l2_latency = float(v("memory", "l2_latency"))
        self.l2_bytes = int(v("memory", "l2_bytes"))
        self.line = int(v("memory", "line_bytes"))
        self.sector = int(v("memory", "sector_bytes"))
        self.l1_per_cycle = float(v("memory", "l1_bytes_per_cycle"))
        self.banks = int(v("memory", "shared_banks"))
        self.bank_bytes = int(v("memory", "shared_bank_bytes"))
        self.tme_per_cycle = float(v("memory", "tme_bytes_per_cycle"))
        self.tme_latency = float(v("memory", "tme_latency"))
        self.hbm_per_cycle = float(v("memory", "hbm_bytes_per_s")) / self.clock_hz
        self.l2_per_cycle = float(v("memory", "l2_bytes_per_s")) / self.clock_hz
        self.launch_overhead = float(v("device", "launch_overhead_us")) * 1e-6 * self.clock_hz
        self.auto_sample_waves = int(v("model", "auto_sample_waves"))
        self.sample_waves = int(v("model", "sample_waves"))
        self.occupancy = {k: int(v("device", k)) for k in (
            "register_file", "shared_per_mp", "max_warps_per_mp", "max_blocks_per_mp",
            "barriers_per_mp")}
        self.warp_size = int(v("isa", "warp_size"))

    def class_latency(self, cls: str) -> float:
        """Issue-to-result cycles of latency class ``cls`` (memory classes: an L2 hit)."""
        if cls in ("ld_global", "atom_global"):
            return self.l2_latency
        return self.latency.get(cls, self.latency["alu"])

    def pipe_ii(self, cls: str) -> float:
        return self.ii.get(pipe_key(cls), 1.0)

    # ------------------------------------------------------------ peaks
    def peak_flops(self, dtype: str | None) -> float:
        """Dense MMA flops/s of the machine for operand type ``dtype`` (a rate key; None:
        the 16-bit rate)."""
        return self.mp_count * self.clock_hz * self.sqmma_rate.get(dtype or "bf16",
                                                                    self.sqmma_rate["bf16"])

    @property
    def peak_hbm(self) -> float:
        return self.hbm_per_cycle * self.clock_hz
