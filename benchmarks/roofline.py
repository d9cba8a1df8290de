"""Rooflines for benchmarks.run: what the simulated platform could do at best, two ways.

- physical: the DDR bandwidth of the chip pypto simulates, from its platform file
  (pypto/lib/configs/A2A3.ini): ddr_rate bytes/cycle per AI core x ai_core_cnt x cube_freq.
  pypto's cost model never reads ddr_rate (only its unit tests do), so a simulated time may
  beat this: the model has no shared DDR cap.
- model: the copy rate pypto's cost model itself charges (`copy_cycles`): every vector core
  copying in and out through tiles as large as the UB, in parallel, in the model's 1.8 GHz
  cycles. A kernel cannot beat it unless the model undercharges its copies (a rank-1 tile is
  charged as one element, see `copy_cycles`).
- cube: for matmuls, the cube FLOP peak of the platform file: cube_m_size x cube_n_size x
  cube_k_size multiply-adds per cycle per cube core (its DtypeMKN Default, 16 x 16 x 16,
  applies to fp32 too: the file lists no fp32 entry) x cube_core_cnt x cube_freq.
"""

from __future__ import annotations

import configparser
import importlib.util
import math
from pathlib import Path

import attrs
import numpy as np

from ptodsl.runtime.simulator import CYCLES_PER_US

# pypto r0.2.0, framework/src/cost_model/simulation/arch/A2A3/PostSimulatorA2A3.h: the
# (per-byte, constant) coefficients of COPY_IN (also L1_/UB_COPY_IN) and COPY_OUT (also
# L0C_/UB_COPY_OUT); PipeSimulatorFast.cpp adds the fixed DDR latencies.
_COPY = {"in": (2.613, 0.00240884, 1400), "out": (3.2883, 0.00195, 300)}
_PARALLEL_RATIO = 2  # GetParrelRatio: 2 for every copy (1 only for some fp32/int32 compute)
_FREQ_TRANS = 2000  # PipeSimulatorFast::PostSimulate's freqTrans


def copy_cycles(direction: str, shape: tuple[int, ...], itemsize: int) -> int:
    """Cycles pypto 0.2.0's cost model charges one copy of a tile of `shape` between DDR and
    the UB (or L1 / L0C), direction "in" or "out".

    Source: pypto r0.2.0 framework/src/cost_model/simulation/arch/PipeSimulatorFast.cpp,
    PipeSimulatorFast::PostSimulate (the fast pipe simulator, accuracy_level 1), with the
    coefficients of A2A3/PostSimulatorA2A3.h:

        cycles = cnt * (floor((a * B * 2 * 1e-6 + b) * 2000) + 1) + L
        in:  a = 2.613,  b = 0.00240884, L = 1400
        out: a = 3.2883, b = 0.00195,    L = 300

    B = itemsize x (product of the tile's last two axes), cnt = product of its leading axes
    (GetMinShapeSize / GetShapeCntSize; pypto takes the minimum of each over the copy's
    operands, the DDR tensor included, so a tile smaller than its tensor decides); 2 is
    GetParrelRatio's factor for copies. a * B * 2 is float32 arithmetic there (a is a float
    coefficient times an integer), emulated here. For a rank-1 shape GetMinShapeSize's
    `size() - 2` wraps around (unsigned) and the tile counts as ONE element whatever its
    length: `copy_cycles(..., (n,), 4)` is that model charge. Large tiles approach
    1e6 / (2 * 2000 * a) bytes per cycle: 95.7 in, 76.0 out.
    """
    a, b, latency = _COPY[direction]
    if len(shape) < 2:
        size, count = 1, 1  # the rank-1 flaw
    else:
        size, count = math.prod(shape[-2:]), math.prod(shape[:-2])
    per_byte = float(np.float32(a) * np.float32(size * itemsize) * np.float32(_PARALLEL_RATIO))
    per_row = int((per_byte * 1e-6 + float(np.float32(b))) * _FREQ_TRANS) + 1
    return count * per_row + latency


# Measured in SIM (pypto 0.2.0): the MTE_IN / MTE_OUT spans of _simulate.pipe.swim.json for
# y = x * 1.0 in f32, every copy of each run alike.
assert copy_cycles("in", (8, 4096), 4) == 2775  # [3072, 4096], tile (8, 4096)
assert copy_cycles("out", (8, 4096), 4) == 2028
assert copy_cycles("in", (1, 49152), 4) == 3460  # [96, 49152], tile (1, 49152): a UB of f32
assert copy_cycles("out", (1, 49152), 4) == 2890
assert copy_cycles("in", (2, 16, 512), 4) == 2096  # [16, 64, 1024], tile (2, 16, 512): cnt 2
assert copy_cycles("out", (2, 16, 512), 4) == 1170
assert copy_cycles("in", (16384,), 4) == 1405  # [262144], tile (16384,): the rank-1 flaw
assert copy_cycles("out", (16384,), 4) == 304


@attrs.frozen
class Platform:
    """The numbers of pypto's A2A3.ini the rooflines use."""

    path: Path
    ddr_rate: int  # bytes per cycle per AI core
    ai_cores: int
    vector_cores: int
    cube_cores: int
    clock_mhz: int  # cube_freq
    ub_bytes: int
    cube_mkn: tuple[int, int, int]

    def ddr_bytes_per_s(self) -> float:
        """Physical DDR bandwidth: ddr_rate x AI cores x clock (about 1.42 TB/s)."""
        return self.ddr_rate * self.ai_cores * self.clock_mhz * 1e6

    def cube_flops_per_s(self) -> float:
        """Cube peak: 2 FLOP per multiply-add, m x n x k per cycle per cube core."""
        return 2 * math.prod(self.cube_mkn) * self.cube_cores * self.clock_mhz * 1e6

    def model_copy_seconds(self, bytes_in: int, bytes_out: int, cores: int) -> float:
        """Least simulated time pypto's cost model allows for reading `bytes_in` and writing
        `bytes_out` on `cores` cores: each core moves its share through tiles of the whole UB
        (2-D, so cnt = 1 and the fixed latency is paid once per UB-sized tile), copy-in and
        copy-out adding up (in SIM a core runs one task at a time, each task's copy-out after
        its copy-in), in the model's clock (cycles / 1800 per us).

        Measured: y = x * 1.0 on f32 [96, 49152] with UB-sized tiles (1, 49152), 96 copies of
        each kind at exactly 3460 / 2890 cycles: this bound is 12700 cycles (7.06 us), the
        simulation 21.65 us (33%; 1.74 TB/s, 123% of the physical DDR roofline). The rest
        is task dispatch: tasks start about 200 cycles apart and spread unevenly over the
        48 vector cores (some run 2-3 tiles while others idle)."""
        cycles = 0.0
        for direction, size in (("in", bytes_in), ("out", bytes_out)):
            per_tile = copy_cycles(direction, (1, self.ub_bytes), 1)
            cycles += size / cores * per_tile / self.ub_bytes
        return cycles / (CYCLES_PER_US * 1e6)

    def describe(self) -> dict[str, str]:
        ub = self.ub_bytes
        rate_in = ub / copy_cycles("in", (1, ub), 1)
        rate_out = ub / copy_cycles("out", (1, ub), 1)
        return {
            "physical": (
                f"DDR {self.ddr_bytes_per_s() / 1e12:.2f} TB/s = ddr_rate {self.ddr_rate}"
                f" B/cycle x {self.ai_cores} AI cores x {self.clock_mhz} MHz ({self.path.name})"
            ),
            "model": (
                f"copy model {self.model_bytes_per_s(rate_in):.2f} TB/s in,"
                f" {self.model_bytes_per_s(rate_out):.2f} TB/s out on {self.vector_cores} vector"
                f" cores (a matmul's operands and product on {self.cube_cores} cube cores)"
                f" = cores x {rate_in:.1f} B/cycle"
                f" in, {rate_out:.1f} B/cycle out (pypto's copy charge for a {ub} B UB tile:"
                f" {copy_cycles('in', (1, ub), 1)} / {copy_cycles('out', (1, ub), 1)} cycles"
                f" incl. 1400 / 300 latency) x {CYCLES_PER_US} MHz, copy-in and copy-out adding"
                " up"
            ),
            "cube": (
                f"cube {self.cube_flops_per_s() / 1e12:.1f} TFLOP/s = 2 x"
                f" {' x '.join(map(str, self.cube_mkn))} MAC/cycle x {self.cube_cores} cube"
                f" cores x {self.clock_mhz} MHz"
            ),
        }

    def model_bytes_per_s(self, rate_per_core: float) -> float:
        return rate_per_core * self.vector_cores * CYCLES_PER_US * 1e6 / 1e12


# The A2A3.ini of pypto 0.2.0, and the measured case of model_copy_seconds' docstring.
_A2A3 = Platform(Path("A2A3.ini"), 32, 24, 48, 24, 1850, 196608, (16, 16, 16))
assert round(_A2A3.ddr_bytes_per_s() / 1e9) == 1421
assert round(_A2A3.model_copy_seconds(96 * 49152 * 4, 96 * 49152 * 4, 48) * 1.8e9) == 12700
assert round(_A2A3.cube_flops_per_s() / 1e12, 1) == 363.7


def platform() -> Platform:
    spec = importlib.util.find_spec("pypto")
    assert spec is not None and spec.origin is not None
    path = Path(spec.origin).parent / "lib" / "configs" / "A2A3.ini"
    config = configparser.ConfigParser()
    config.read(path)
    soc, core = config["SoCInfo"], config["AICoreSpec"]
    mkn = tuple(int(core[f"cube_{axis}_size"]) for axis in "mnk")
    assert mkn == tuple(int(v) for v in config["DtypeMKN"]["Default"].split(","))
    return Platform(
        path=path,
        ddr_rate=int(config["AICoreMemoryRates"]["ddr_rate"]),
        ai_cores=int(soc["ai_core_cnt"]),
        vector_cores=int(soc["vector_core_cnt"]),
        cube_cores=int(soc["cube_core_cnt"]),
        clock_mhz=int(core["cube_freq"]),
        ub_bytes=int(core["ub_size"]),
        cube_mkn=mkn,
    )
