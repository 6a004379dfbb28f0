"""Errors the controller returns, as one exception a workload can act on."""

from __future__ import annotations

import re
from typing import Optional

import grpc

# The controller puts the offending field's path in this response metadata
# key (proto/ndsp/README.md, "Error model").
FIELD_METADATA_KEY = "ndsp-field"

# "<field path>: <reason>", e.g. "demands[1].deadline_offset_ns: ..." (also
# used by ALREADY_EXISTS answers, which carry no metadata).
_FIELD_PATH = re.compile(r"^([a-z_]+(?:\[\d+\])?(?:\.[a-z_]+(?:\[\d+\])?)*): ")

# Statuses after which the same request may succeed if sent again.
RETRYABLE = frozenset(
    {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.RESOURCE_EXHAUSTED}
)


class NdspError(Exception):
    """An NDSP call failed.

    `code` is the gRPC status, `message` the controller's text (for
    INVALID_ARGUMENT: "<field path>: <reason>"), `field` the field path the
    controller named (from the `ndsp-field` metadata, else parsed from the
    message), `reason` the text after it.
    """

    def __init__(self, rpc: str, code: grpc.StatusCode, message: str, field: Optional[str] = None):
        self.rpc = rpc
        self.code = code
        self.message = message
        self.field = field
        self.reason = message[len(field) + 2 :] if field and message.startswith(field + ": ") else message
        where = f" [{field}]" if field else ""
        super().__init__(f"{rpc}: {code.name}{where}: {message}")

    @property
    def retryable(self) -> bool:
        """True when sending the same request again may succeed (transport or load)."""
        return self.code in RETRYABLE

    @classmethod
    def from_rpc_error(cls, rpc: str, err: grpc.RpcError) -> "NdspError":
        code = err.code() if hasattr(err, "code") else grpc.StatusCode.UNKNOWN
        message = (err.details() if hasattr(err, "details") else None) or str(err)
        field = None
        for md in (getattr(err, "trailing_metadata", None), getattr(err, "initial_metadata", None)):
            try:
                pairs = md() if md else None
            except Exception:  # a failed call may carry no metadata at all
                pairs = None
            for key, value in pairs or ():
                if key == FIELD_METADATA_KEY:
                    field = value.decode() if isinstance(value, bytes) else value
        if field is None:
            m = _FIELD_PATH.match(message)
            field = m.group(1) if m else None
        return cls(rpc, code, message, field)
