"""The values test_fp8's sources hold, and the reference rule they are
checked against, written here with torch ops from the rule's definition
(DeepGEMM's per_block_cast_to_fp8, as slime and SGLang use it), not from
wex's C code."""
import zlib

import torch

BLOCK = 128
E4M3_MAX = 448.0


def make(name, dtype, shape, step):
    """Deterministic random values of `dtype` for tensor `name` at `step`,
    with the blocks that matter at the edges of the rule planted in every
    2-d weight: an all-zero block (0, 0), a block (0, 1) with one huge
    value (3000) beside values of about 0.02, whose quotients fall to e4m3
    subnormals and zero, and whatever ragged blocks the shape has at its edges."""
    g = torch.Generator().manual_seed(zlib.crc32(name.encode()) * 131 + step)
    if dtype == torch.float8_e4m3fn:
        codes = torch.randint(0, 256, shape, generator=g, dtype=torch.int32)
        codes = torch.where((codes & 0x7F) == 0x7F, codes ^ 1, codes)
        return codes.to(torch.uint8).view(torch.float8_e4m3fn)
    if dtype == torch.float32 and name.endswith("_scale_inv"):
        # scales as a checkpoint has them: positive, around amax / 448
        return (torch.rand(shape, generator=g) * 4e-3 + 1e-5).to(dtype)
    x = torch.randn(shape, generator=g) * 0.02
    if len(shape) == 2 and shape[0] > 3 and shape[1] > 0:
        x[:BLOCK, :BLOCK] = 0.0
        if shape[1] > BLOCK + 5:
            x[3, BLOCK + 5] = 3000.0
    return x.to(dtype)


def quantize(w):
    """(e4m3 weight, float32 scale_inv) of a 2-d float tensor, per 128 x
    128 block (partial at the edges): amax in float32 clamped to 1e-4,
    elements e4m3(x * (448 / amax)), scale_inv amax / 448."""
    rows, cols = w.shape
    pr, pc = -rows % BLOCK, -cols % BLOCK
    x = torch.nn.functional.pad(w.float(), (0, pc, 0, pr))
    x = x.view(x.shape[0] // BLOCK, BLOCK, x.shape[1] // BLOCK, BLOCK)
    amax = x.abs().amax(dim=(1, 3), keepdim=True).clamp(min=1e-4)
    q = (x * (E4M3_MAX / amax)).to(torch.float8_e4m3fn)
    q = q.view(x.shape[0] * BLOCK, x.shape[2] * BLOCK)[:rows, :cols]
    return q.contiguous(), (amax / E4M3_MAX).view(amax.shape[0], amax.shape[2])


def dequantize(q, scale_inv, dtype):
    """e4m3 times its block's scale_inv, in float32, rounded to `dtype`."""
    s = scale_inv.repeat_interleave(BLOCK, 0).repeat_interleave(BLOCK, 1)
    s = s[:q.shape[0], :q.shape[1]]
    return (q.float() * s).to(dtype)
