"""Transcendental functions built from basic arithmetic, for renderers without exp2/log2/sin."""
from tgfn.uop.ops import PatternMatcher

decompose_transcendentals = PatternMatcher([])
