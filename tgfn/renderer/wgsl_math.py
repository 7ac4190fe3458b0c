"""float32 helpers for WGSL kernels (tgfn/renderer/wgsl.py): + - * / sqrt with IEEE denormals, and exp2,
log2, sin and cos.

SwiftShader (Chromium's software WebGPU) compiles float math as a graphics driver does: it flushes denormal
operands and results to zero, and its builtins are loose (log2 180 ulp near 1, sin 2e-4 absolute near its
zeros, log2(0) finite). Codegen's decompositions (tgfn/codegen/decompositions.py) need 64-bit integers for
sin's reduction and assume denormals. These helpers use the decompositions' polynomials, 32-bit integers only:
  - every float op's result passes through `tg_r` (the rounding barrier: see wgsl.py), so each rounds once;
  - + - * / sqrt run natively and take a slow path only where a denormal may occur (an operand or the result
    below 2^-125, or both operands below 2^-100 for a sum): the mantissas' product in integers, and their native
    quotient corrected by its exact integer remainder, each rounded once to nearest even (`tg_round`); sums and
    square roots on operands scaled by 2^64, where nothing rounds twice (a denormal sum is exact);
  - log2 normalizes a denormal x by converting its bits to float, exp2 rounds a denormal result's mantissa;
  - sin and cos reduce |x| > pi/4 by Payne-Hanek in u32 arithmetic: the 24-bit mantissa times a 96-bit window
    of 2/pi's bits (modulo 4 quadrants, 94 fraction bits), the fraction normalized and multiplied by pi/2 in
    fixed point (within 2^-29 relative, before r's one rounding to float32).
tests/drivers/test_webgpu.py checks + - * / sqrt bit for bit against NumPy and exp2, log2, sin, cos within 3 ulp
(measured: 1.1, 2.9, 1.5 and 1.5 ulp)."""
from __future__ import annotations

import struct

from tgfn.codegen.decompositions import _FORMATS, _TWO_OVER_PI_WORDS  # the polynomials and 2/pi's bits, shared
from tgfn.dtype import dtypes

_F32 = _FORMATS[dtypes.float32]


def _bits(v: float) -> str: return f"bitcast<f32>({struct.unpack('<I', struct.pack('<f', v))[0]:#010x}u)"


def _horner(x: str, coeffs: tuple[float, ...]) -> str:
  """coeffs[0] + coeffs[1] * x + ... by Horner's rule, each op rounded once."""
  acc = _bits(coeffs[-1])
  for c in reversed(coeffs[:-1]): acc = f"tg_r(tg_r({acc} * {x}) + {_bits(c)})"
  return acc


# every helper's text; `needs` lists the helpers each one calls
HELPERS = {
  "tg_r": "fn tg_r(x: f32) -> f32 { return bitcast<f32>(bitcast<u32>(x) ^ tg_zero); }\n",
  # the sign flipped in bits (a compiler that assumes no signed zeros may compute -x as 0 - x)
  "tg_neg": "fn tg_neg(x: f32) -> f32 { return bitcast<f32>(bitcast<u32>(x) ^ 0x80000000u); }\n",
  "tg_exp2": f"""fn tg_exp2(x: f32) -> f32 {{
  if ((bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u) {{ return x; }}
  if (x >= 128.0f) {{ return bitcast<f32>(0x7f800000u ^ tg_zero); }}
  let c = max(x, -152.0f);  // 2^-152 rounds to 0 as every smaller power does
  let n = tg_r(tg_r(c + 12582912.0f) - 12582912.0f);  // c rounded to an integer (ties to even)
  let f = tg_r(c - n);  // exact, in [-1/2, 1/2]
  let p = bitcast<u32>(tg_r(tg_r({_horner("f", _F32.exp2_poly)} * f) + 1.0f));  // 2^f in [0.7, 1.5)
  let e = i32(p >> 23u) + i32(n);  // the biased exponent of p * 2^n
  if (e >= 1) {{ return bitcast<f32>((u32(e) << 23u) | (p & 0x7fffffu)); }}
  // a denormal result: the mantissa times 2^-(1 - e) (below 2^23), rounded to an integer (nearest even) by adding 2^23
  let shift = u32(1 - e);
  if (shift > 25u) {{ return 0.0f; }}
  let scaled = tg_r(f32(i32((p & 0x7fffffu) | 0x800000u)) * bitcast<f32>((127u - shift) << 23u));
  return bitcast<f32>(u32(i32(tg_r(tg_r(scaled + 8388608.0f) - 8388608.0f))));
}}
""",
  "tg_log2": f"""fn tg_log2(x: f32) -> f32 {{
  let u = bitcast<u32>(x);
  if (u == 0u || u == 0x80000000u) {{ return bitcast<f32>(0xff800000u ^ tg_zero); }}
  if (u >= 0x7f800000u) {{ return select(bitcast<f32>(0x7fc00000u ^ tg_zero), x, u == 0x7f800000u); }}  // inf; NaN, x < 0
  var e = i32(u >> 23u) - 127; var mantissa = u & 0x7fffffu;
  if (e == -127) {{  // denormal: normalized by an exact conversion of its bits to float (x = bits * 2^-149)
    let f = bitcast<u32>(f32(i32(u)));
    mantissa = f & 0x7fffffu; e = i32(f >> 23u) - 276;
  }}
  // m in [sqrt(1/2), sqrt(2)): the mantissa with exponent 0, or -1 from sqrt(2) on
  let high = mantissa >= 0x3504f3u;
  let m = bitcast<f32>(mantissa | select(0x3f800000u, 0x3f000000u, high));
  let t = tg_r(tg_r(m - 1.0f) / tg_r(m + 1.0f));
  let q = {_horner("tg_r(t * t)", _F32.log2_poly)};
  return tg_r(f32(e + select(0, 1, high)) + tg_r(t * q));
}}
""",
  "tg_mulhi": """fn tg_mulhi(a: u32, b: u32) -> u32 {  // the high word of a * b, in 16-bit halves
  let al = a & 0xffffu; let ah = a >> 16u; let bl = b & 0xffffu; let bh = b >> 16u;
  let m1 = ah * bl; let m2 = al * bh;
  let mid = ((al * bl) >> 16u) + (m1 & 0xffffu) + (m2 & 0xffffu);
  return ah * bh + (m1 >> 16u) + (m2 >> 16u) + (mid >> 16u);
}
""",
  "tg_sincos": f"""const tg_two_over_pi = array<u32, 10>({", ".join(f"{w:#010x}u" for w in _TWO_OVER_PI_WORDS[:10])});
fn tg_two_over_pi_at(i: u32, offset: u32) -> u32 {{  // 32 bits of 2/pi from bit 32 * i + offset of the table
  let w = tg_two_over_pi; let next = select(0u, w[i + 1u] >> (32u - offset), offset != 0u);
  return (w[i] << offset) | next;
}}
fn tg_sincos(x: f32, quarter_turns: u32) -> f32 {{  // sin(x + quarter_turns * pi/2)
  let a = bitcast<u32>(x) & 0x7fffffffu;
  if (a >= 0x7f800000u) {{ return bitcast<f32>(0x7fc00000u ^ tg_zero); }}
  var n = 0u; var r = bitcast<f32>(a);  // |x| = n pi/2 + r
  if (a > 0x3f490fdau) {{  // |x| > pi/4: Payne-Hanek, |x| * 2/pi mod 4 with 94 fraction bits
    let m = (a & 0x7fffffu) | 0x800000u;
    let start = (a >> 23u) - 120u;  // the window's first bit: weight 2^-(exponent - 1), after the zero word
    let i = start >> 5u; let offset = start & 31u;
    let w2 = tg_two_over_pi_at(i, offset); let w1 = tg_two_over_pi_at(i + 1u, offset);
    let w0 = tg_two_over_pi_at(i + 2u, offset);
    let p0 = m * w0; let h0 = tg_mulhi(m, w0);
    let p1 = h0 + m * w1;
    let p2 = tg_mulhi(m, w1) + m * w2 + select(0u, 1u, p1 < h0);
    n = (p2 >> 30u) + ((p2 >> 29u) & 1u);  // the quadrant, rounded to nearest
    // the fraction in [-1/2, 1/2), as a signed 64-bit number hi:lo times 2^-64; its magnitude
    var hi = (p2 << 2u) | (p1 >> 30u); var lo = (p1 << 2u) | (p0 >> 30u);
    let negative = (hi >> 31u) != 0u;
    if (negative) {{ hi = ~hi; lo = ~lo + 1u; hi += select(0u, 1u, lo == 0u); }}
    // normalized: top = the magnitude's leading 32 bits, the magnitude is top * 2^-(32 + lead)
    var lead = countLeadingZeros(hi); var top = (hi << lead) | select(0u, lo >> (32u - lead), lead != 0u);
    if (hi == 0u) {{ lead = 32u + countLeadingZeros(lo); top = lo << (lead - 32u); }}
    // r = magnitude * pi/2 = (top * pi/4 * 2^32) * 2^-(63 + lead), rounded to 24 bits
    let product = tg_mulhi(top, 0xc90fdaa2u);  // in [2^30, 2^32)
    let s = countLeadingZeros(product);
    let normal = product << s;
    let mantissa = (normal >> 8u) + ((normal >> 7u) & 1u);  // 2^23 ..= 2^24 (a carry moves into the exponent)
    r = bitcast<f32>(select(0u, ((126u - lead - s) << 23u) + mantissa, top != 0u) | select(0u, 0x80000000u, negative));
  }}
  if ((bitcast<u32>(x) >> 31u) != 0u) {{ n = 0u - n; r = tg_neg(r); }}  // sin(-x) = -sin(x)
  let z = tg_r(r * r);
  // where z is 0 (r denormal or tiny), sin r is r: the sum would flush a denormal r
  let sin_r = select(tg_r(r + tg_r(tg_r(r * z) * {_horner("z", _F32.sin_poly)})), r, z == 0.0f);
  let cos_r = tg_r(tg_r({_horner("z", _F32.cos_poly)} * z) + 1.0f);
  let q = n + quarter_turns;
  let out = select(sin_r, cos_r, (q & 1u) != 0u);
  return select(out, tg_neg(out), (q & 2u) != 0u);
}}
""",
  # ---- + - * / and sqrt with IEEE denormals: SwiftShader flushes denormal operands and results to zero, so
  # where one may occur the op is done in integers (or on values scaled into the normal range, exactly)
  "tg_split": """fn tg_split(u: u32) -> vec2<i32> {  // finite nonzero |x| = m * 2^(e - 23), m in [2^23, 2^24): (m, e)
  // a denormal's mantissa, converted to float exactly, has it normalized (constant shifts: variable ones are slow)
  let a = u & 0x7fffffffu; let normal = a >= 0x00800000u;
  let f = select(bitcast<u32>(f32(i32(a))), a, normal);
  return vec2<i32>(i32((f & 0x7fffffu) | 0x800000u), i32(f >> 23u) - select(276, 127, normal));
}
""",
  "tg_small": "fn tg_small(u: u32) -> bool { return (u & 0x7fffffffu) < 0x01000000u; }  // 0, denormal, or < 2^-125\n",
  "tg_round": """fn tg_round(sign: u32, m: u32, lead: u32, e: i32, sticky: bool) -> f32 {
  // sign | m * 2^(e - lead), whose leading bit is bit `lead` (< 32) of m, rounded once to nearest even; `sticky`
  // says whether nonzero bits below m were dropped
  let biased = e + 127;
  let want = lead - 23u + u32(max(0, 1 - biased));  // at least 1
  let shift = min(want, lead + 1u);  // beyond, the result is 0
  let kept = select(m >> shift, 0u, shift == 32u);
  let half = (m >> (shift - 1u)) & 1u;
  let up = half == 1u && (sticky || (m & ((1u << (shift - 1u)) - 1u)) != 0u || (kept & 1u) == 1u);
  // a denormal's bits are its mantissa; a normal's exponent is added to its leading bit (a carry moves it on)
  let bits = select(0u, u32(biased - 1) << 23u, biased >= 1) + kept + select(0u, 1u, up);
  return bitcast<f32>(sign | select(select(bits, 0u, want > lead + 1u), 0x7f800000u, biased >= 255));
}
""",
  "tg_up64": """fn tg_up64(u: u32) -> f32 {  // x * 2^64 for |x| < 2^-100, exactly (a denormal: its mantissa times 2^-85)
  let denormal = tg_r(f32(i32(u & 0x7fffffu)) * bitcast<f32>(0x15000000u ^ tg_zero));
  return bitcast<f32>(select(u + (64u << 23u), bitcast<u32>(denormal) | (u & 0x80000000u), (u & 0x7f800000u) == 0u));
}
""",
  "tg_add": """fn tg_add(a: f32, b: f32) -> f32 {
  let ua = bitcast<u32>(a); let ub = bitcast<u32>(b);
  if (max(ua & 0x7fffffffu, ub & 0x7fffffffu) >= 0x0d800000u) { return tg_r(a + b); }  // beyond 2^-100 denormals do not matter
  // both below 2^-100: added scaled by 2^64 and scaled back; a sum that is denormal is exact, so nothing rounds twice
  let s = bitcast<u32>(tg_r(tg_up64(ua) + tg_up64(ub)));
  let e = (s >> 23u) & 0xffu;
  if (e > 64u || e == 0u) { return bitcast<f32>(select(s - (64u << 23u), s, e == 0u)); }  // normal, or zero
  // a denormal: |s| * 2^85 is its mantissa, an integer (no bits were lost)
  return bitcast<f32>((s & 0x80000000u) | u32(tg_r(bitcast<f32>(s & 0x7fffffffu) * bitcast<f32>(0x6a000000u ^ tg_zero))));
}
""",
  "tg_mul": """fn tg_mul(a: f32, b: f32) -> f32 {
  let r = tg_r(a * b);
  let ua = bitcast<u32>(a); let ub = bitcast<u32>(b); let sign = (ua ^ ub) & 0x80000000u;
  let big = max(ua & 0x7fffffffu, ub & 0x7fffffffu); let little = min(ua & 0x7fffffffu, ub & 0x7fffffffu);
  // exact but where an operand or the result is denormal (or 0, or tiny), for finite operands
  let x = tg_split(ua); let y = tg_split(ub);
  let hi = tg_mulhi(u32(x.x), u32(y.x)); let lo = u32(x.x) * u32(y.x);  // in [2^46, 2^48)
  let lead = select(30u, 31u, (hi >> 15u) != 0u);  // of the top 32 bits, (hi:lo) >> 16
  let exact = select(tg_round(sign, (hi << 16u) | (lo >> 16u), lead, x.y + y.y + i32(lead) - 30, (lo & 0xffffu) != 0u),
                     bitcast<f32>(sign), little == 0u);
  let slow = big < 0x7f800000u && (tg_small(ua) || tg_small(ub) || tg_small(bitcast<u32>(r)));
  // inf times a denormal is inf (r is NaN: the denormal was read as 0)
  return select(select(r, bitcast<f32>(sign | 0x7f800000u), big == 0x7f800000u && little != 0u), exact, slow);
}
""",
  "tg_div": """fn tg_div(a: f32, b: f32) -> f32 {
  let r = tg_r(a / b);
  let ua = bitcast<u32>(a); let ub = bitcast<u32>(b);
  let special = max(ua & 0x7fffffffu, ub & 0x7fffffffu) >= 0x7f800000u;  // inf or NaN: r is right
  if (special || !(tg_small(ua) || tg_small(ub) || tg_small(bitcast<u32>(r)))) { return r; }
  let sign = (ua ^ ub) & 0x80000000u;
  if ((ub & 0x7fffffffu) == 0u) {
    return select(bitcast<f32>(sign | 0x7f800000u), bitcast<f32>(0x7fc00000u ^ tg_zero), (ua & 0x7fffffffu) == 0u);
  }
  if ((ua & 0x7fffffffu) == 0u) { return bitcast<f32>(sign); }
  // the mantissas' quotient in [1, 2) to 26 bits: the native quotient q (24 bits, correctly rounded) corrected by
  // the exact remainder num * 2^23 - q * den (below 2^24 in magnitude, so wrapping u32 arithmetic holds it)
  let x = tg_split(ua); let y = tg_split(ub);
  var num = u32(x.x); let den = u32(y.x); var e = x.y - y.y;
  if (num < den) { num = num << 1u; e -= 1; }
  let q = u32(i32(tg_r(tg_r(f32(i32(num)) / f32(i32(den))) * 8388608.0f)));
  let r4 = 4 * bitcast<i32>((num << 23u) - q * den);  // in (-2 den, 2 den): a 24-bit quotient is never a tie
  let d = select(select(select(-2, -1, r4 >= -i32(den)), 0, r4 >= 0), 1, r4 >= i32(den));  // floor(r4 / den)
  return tg_round(sign, u32(i32(4u * q) + d), 25u, e, r4 != d * i32(den));
}
""",
  "tg_sqrt": """fn tg_sqrt(x: f32) -> f32 {
  let u = bitcast<u32>(x);
  if ((u & 0x7f800000u) != 0u || (u & 0x7fffffu) == 0u) { return sqrt(x); }
  if ((u >> 31u) != 0u) { return bitcast<f32>(0x7fc00000u ^ tg_zero); }  // a negative denormal
  return bitcast<f32>(bitcast<u32>(sqrt(tg_up64(u))) - (32u << 23u));  // sqrt(x * 2^64) * 2^-32, exactly
}
""",
}
NEEDS = {"tg_exp2": ("tg_r",), "tg_log2": ("tg_r",), "tg_sincos": ("tg_r", "tg_neg", "tg_mulhi"),
         "tg_add": ("tg_r", "tg_up64"), "tg_mul": ("tg_r", "tg_small", "tg_split", "tg_mulhi", "tg_round"),
         "tg_div": ("tg_r", "tg_small", "tg_split", "tg_round"), "tg_sqrt": ("tg_r", "tg_up64")}
# how a kernel calls each function on its float32 operand
CALLS = {"EXP2": "tg_exp2({})", "LOG2": "tg_log2({})", "SIN": "tg_sincos({}, 0u)", "COS": "tg_sincos({}, 1u)"}
