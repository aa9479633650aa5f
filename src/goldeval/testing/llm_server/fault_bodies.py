"""What a scripted fault sends instead of an answer: the canned error bodies of a context
overflow and an unknown model (as each protocol words them), and the faults that write the
whole response themselves (a slow drip, an endless or truncated stream, deeply nested JSON)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from goldeval.testing.llm_server.faults import Fault, RecordedRequest
from goldeval.testing.llm_server.wire import now_iso

if TYPE_CHECKING:  # the handler imports this module; the faults only need its type
    from goldeval.testing.llm_server.handler import Handler


def _context_length_body(record: RecordedRequest) -> dict[str, Any]:
    if record.protocol == "ollama":
        return {"error": "the input length exceeds the context length"}
    return {
        "error": {
            "message": "This model's maximum context length is 8192 tokens. However, your "
            "messages resulted in 9001 tokens. Please reduce the length of the messages.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    }


def _model_not_found_body(record: RecordedRequest) -> dict[str, Any]:
    model = record.model or ""
    if record.protocol == "ollama":
        return {"error": f'model "{model}" not found, try pulling it first'}
    return {
        "error": {
            "message": f"The model `{model}` does not exist or you do not have access to it.",
            "type": "invalid_request_error",
            "param": None,
            "code": "model_not_found",
        }
    }


#: Error bodies of :meth:`Fault.context_length` and :meth:`Fault.model_not_found`.
CANNED_BODIES: dict[str, Callable[[RecordedRequest], dict[str, Any]]] = {
    "context_length": _context_length_body,
    "model_not_found": _model_not_found_body,
}

# --------------------------------------------------------------------------- body faults


def _stream_piece(record: RecordedRequest, text: str) -> bytes:
    """One content piece of a stream in the request's protocol (no finish reason)."""
    model = record.model or "fake"
    if record.protocol == "ollama":
        message = {"role": "assistant", "content": text}
        line = {"model": model, "created_at": now_iso(), "message": message, "done": False}
        return (json.dumps(line) + "\n").encode()
    event = {
        "id": "chatcmpl-fault",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}],
    }
    return f"data: {json.dumps(event)}\n\n".encode()


def _stream_type(record: RecordedRequest) -> str:
    return "application/x-ndjson" if record.protocol == "ollama" else "text/event-stream"


def _slow_drip(h: Handler, fault: Fault, record: RecordedRequest) -> None:
    """200 with a large declared Content-Length, then one byte per ``fault.seconds``."""
    declared = int(fault.body)
    h.close_connection = True
    h.send_response(200)
    h.send_header("Content-Type", "application/json")
    h.send_header("Content-Length", str(declared))
    h.send_header("Connection", "close")
    h.end_headers()
    h.wfile.flush()
    for _ in range(declared):
        h.sleep(fault.seconds)
        h.wfile.write(b" ")
        h.wfile.flush()


def _endless_stream(h: Handler, fault: Fault, record: RecordedRequest) -> None:
    """A chunked stream of content pieces, ``fault.seconds`` apart, that never ends."""
    h.close_connection = True
    h.send_response(200)
    h.send_header("Content-Type", _stream_type(record))
    h.send_header("Transfer-Encoding", "chunked")
    h.end_headers()
    while True:
        piece = _stream_piece(record, "more ")
        h.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
        h.wfile.flush()
        h.sleep(fault.seconds)


def _truncated_stream(h: Handler, fault: Fault, record: RecordedRequest) -> None:
    """The first piece of a stream, then its end without a finish reason."""
    body = _stream_piece(record, "partial ")
    if record.protocol == "openai":
        body += b"data: [DONE]\n\n"
    h.send(200, body, _stream_type(record))


def _streamed(record: RecordedRequest) -> bool:
    """Whether the request asked for a stream (Ollama streams unless told not to)."""
    body = record.json if isinstance(record.json, dict) else {}
    if record.protocol == "ollama":
        return body.get("stream", True) is not False
    return body.get("stream") is True


def _deep_json(h: Handler, fault: Fault, record: RecordedRequest) -> None:
    """A JSON object nested ``fault.body`` levels deep, as the body or a stream's event."""
    depth = int(fault.body)
    document = b'{"error":' * depth + b"1" + b"}" * depth
    if fault.status_code == 200 and _streamed(record):
        if record.protocol == "openai":
            h.send(200, b"data: " + document + b"\n\n", "text/event-stream")
        else:
            h.send(200, document + b"\n", "application/x-ndjson")
        return
    h.send(fault.status_code, document, "application/json")


#: Faults that write the whole response themselves (the request is not answered normally).
BODY_FAULTS: dict[str, Callable[[Handler, Fault, RecordedRequest], None]] = {
    "slow_drip": _slow_drip,
    "endless_stream": _endless_stream,
    "truncated_stream": _truncated_stream,
    "deep_json": _deep_json,
}
