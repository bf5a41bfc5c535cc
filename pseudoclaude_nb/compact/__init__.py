"""Keeping the context under the window: estimates now; spill and summary build on them."""

from .estimate import estimate_request, estimate_text, estimate_tokens

__all__ = ["estimate_request", "estimate_text", "estimate_tokens"]
