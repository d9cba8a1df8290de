"""Check our KernelBench-format problem files against the originals.

Usage:
    python tests/problems/compare_kernelbench.py KERNELBENCH_LEVEL_DIR OUR_DIR [NUMBERS...]
        [--scale [N,N,...]] [--batch B] [--spatial-div K]

For each problem number (all numbers found in OUR_DIR when none are given) the original
file `N_*.py` in KERNELBENCH_LEVEL_DIR and ours in OUR_DIR are imported and compared:

  * get_init_inputs() returns the same values;
  * for seeds 0 and 1, Model(*init) built right after torch.manual_seed(seed) has the same
    named_parameters() (names, shapes, values), the same state_dict() keys and buffers, and
    leaves the global RNG in the same state (same number of draws);
  * get_inputs() after the same seed gives the same shapes (and values);
  * both models give torch.equal outputs on the same inputs, in eval() mode and in train()
    mode (with the same seed before each forward, for dropout); after the train-mode forward
    the state_dicts (e.g. batch-norm running statistics) must still agree.

--scale shrinks the module-level size constants in BOTH modules before get_inputs() /
get_init_inputs() are called: `batch_size` becomes min(batch_size, --batch) and, when
--spatial-div K > 1, the spatial sizes (depth/height/width/D/H/W) are divided by K.
Without a value --scale applies to every problem; `--scale 3,26` only to those numbers.

One line per problem is printed; the exit status is 1 if anything differs.
"""

import argparse
import importlib.util
import sys
import time
from pathlib import Path

import torch

SPATIAL_NAMES = ("depth", "height", "width", "D", "H", "W")


def find_file(directory: Path, number: int):
    hits = sorted(directory.glob(f"{number}_*.py"))
    return hits[0] if hits else None


def load(path: Path, tag: str):
    spec = importlib.util.spec_from_file_location(f"_kbcmp_{tag}_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def shrink(module, batch: int, spatial_div: int):
    if hasattr(module, "batch_size"):
        module.batch_size = min(module.batch_size, batch)
    if spatial_div > 1:
        for name in SPATIAL_NAMES:
            value = getattr(module, name, None)
            if isinstance(value, int) and not isinstance(value, bool):
                setattr(module, name, max(1, value // spatial_div))


def same_value(a, b) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (
            isinstance(a, torch.Tensor)
            and isinstance(b, torch.Tensor)
            and a.dtype == b.dtype
            and a.shape == b.shape
            and torch.equal(a, b)
        )
    if isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)):
        return (
            type(a) is type(b)
            and len(a) == len(b)
            and all(same_value(x, y) for x, y in zip(a, b, strict=True))
        )
    return type(a) is type(b) and a == b


def describe(value):
    if isinstance(value, torch.Tensor):
        return f"tensor{tuple(value.shape)}:{value.dtype}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(describe(v) for v in value) + "]"
    return repr(value)


def shapes(values):
    return [tuple(v.shape) if isinstance(v, torch.Tensor) else repr(v) for v in values]


def clone_all(values):
    return [v.clone() if isinstance(v, torch.Tensor) else v for v in values]


def max_diff(a, b):
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape:
        if a.is_floating_point():
            return f" (max |diff| {(a.double() - b.double()).abs().max().item():.3g})"
    return ""


def compare_models(ma, mb, what: str, problems: list):
    pa = list(ma.named_parameters())
    pb = list(mb.named_parameters())
    if [n for n, _ in pa] != [n for n, _ in pb]:
        problems.append(f"{what}: parameter names {[n for n, _ in pa]} vs {[n for n, _ in pb]}")
        return
    for (name, a), (_, b) in zip(pa, pb, strict=True):
        if a.shape != b.shape:
            problems.append(f"{what}: parameter {name} shape {tuple(a.shape)} vs {tuple(b.shape)}")
        elif not torch.equal(a, b):
            problems.append(f"{what}: parameter {name} values differ")
    sa, sb = ma.state_dict(), mb.state_dict()
    if list(sa.keys()) != list(sb.keys()):
        problems.append(f"{what}: state_dict keys {list(sa.keys())} vs {list(sb.keys())}")
        return
    for key in sa:
        if not same_value(sa[key], sb[key]):
            problems.append(f"{what}: state_dict[{key}] differs")


def compare_problem(
    orig_path: Path, ours_path: Path, n: int, scale: bool, batch: int, spatial_div: int
):
    problems = []
    A = load(orig_path, f"orig{n}")
    B = load(ours_path, f"ours{n}")
    if scale:
        shrink(A, batch, spatial_div)
        shrink(B, batch, spatial_div)

    init_a, init_b = A.get_init_inputs(), B.get_init_inputs()
    if not same_value(init_a, init_b):
        problems.append(f"get_init_inputs {describe(init_a)} vs {describe(init_b)}")
        return problems

    for seed in (0, 1):
        torch.manual_seed(seed)
        ma = A.Model(*init_a)
        rng_a = torch.get_rng_state()
        torch.manual_seed(seed)
        mb = B.Model(*init_b)
        rng_b = torch.get_rng_state()
        before = len(problems)
        compare_models(ma, mb, f"seed {seed} init", problems)
        models_agree = len(problems) == before
        if not torch.equal(rng_a, rng_b):
            problems.append(
                f"seed {seed}: RNG state after Model() differs (different number of draws)"
            )

        torch.manual_seed(seed)
        xa = A.get_inputs()
        torch.manual_seed(seed)
        xb = B.get_inputs()
        if shapes(xa) != shapes(xb):
            problems.append(f"seed {seed}: input shapes {shapes(xa)} vs {shapes(xb)}")
            return problems
        if not same_value(list(xa), list(xb)):
            problems.append(f"seed {seed}: input values differ")
        del xb

        for mode in ("eval", "train"):
            getattr(ma, mode)()
            getattr(mb, mode)()
            with torch.no_grad():
                torch.manual_seed(1000 + seed)
                ya = ma(*clone_all(xa))
                torch.manual_seed(1000 + seed)
                yb = mb(*clone_all(xa))
            if not same_value(ya, yb):
                problems.append(
                    f"seed {seed} {mode}: outputs differ {describe(ya)} vs {describe(yb)}"
                    f"{max_diff(ya, yb)}"
                )
            del ya, yb
            if models_agree:  # otherwise the init mismatch has been reported already
                compare_models(ma, mb, f"seed {seed} after {mode} forward", problems)
        del xa, ma, mb
    return problems


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("level_dir", type=Path)
    parser.add_argument("our_dir", type=Path)
    parser.add_argument("numbers", nargs="*", type=int)
    parser.add_argument(
        "--scale",
        nargs="?",
        const="all",
        default=None,
        help="shrink sizes (all problems, or a comma-separated list of numbers)",
    )
    parser.add_argument("--batch", type=int, default=2, help="batch_size under --scale (default 2)")
    parser.add_argument(
        "--spatial-div",
        type=int,
        default=1,
        help="divide depth/height/width/D/H/W by this under --scale (default 1: keep)",
    )
    args = parser.parse_args(argv)

    numbers = args.numbers
    if not numbers:
        numbers = sorted(
            int(p.name.split("_")[0])
            for p in args.our_dir.glob("*_*.py")
            if p.name.split("_")[0].isdigit()
        )
    if args.scale is None:
        scaled = set()
    elif args.scale == "all":
        scaled = set(numbers)
    else:
        scaled = {int(t) for t in args.scale.split(",") if t.strip()}

    failed = 0
    for n in numbers:
        orig, ours = find_file(args.level_dir, n), find_file(args.our_dir, n)
        if orig is None or ours is None:
            print(f"{n}: missing file (original: {orig}, ours: {ours})", flush=True)
            failed += 1
            continue
        name = orig.stem.split("_", 1)[1]
        problems = []
        if ours.name != orig.name:
            problems.append(f"file name {ours.name} vs original {orig.name}")
        start = time.time()
        try:
            problems += compare_problem(orig, ours, n, n in scaled, args.batch, args.spatial_div)
        except Exception as exc:  # report and keep going
            problems.append(f"error: {type(exc).__name__}: {exc}")
        note = " [scaled]" if n in scaled else ""
        took = f" ({time.time() - start:.1f}s)"
        if problems:
            failed += 1
            print(f"{n} {name}: DIFFERS{note}{took}: " + "; ".join(problems), flush=True)
        else:
            print(f"{n} {name}: ok{note}{took}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
