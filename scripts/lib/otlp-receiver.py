#!/usr/bin/env python3
"""A real OTLP/HTTP trace receiver on loopback, for scripts/benchmark-tracing.sh.

    otlp-receiver.py PORT COUNTS_FILE [--stall]

Accepts POST /v1/traces (OTLP protobuf, keep-alive), answers 200 with an empty ExportTraceServiceResponse, and
counts what arrived: export requests, spans, spans per name prefix ("process", "store", "publish") and the
`messaging.message.id` of every process span (so the benchmark can tell one process span per message from
duplicates or gaps). The counts are written to COUNTS_FILE as JSON on every request and on SIGTERM. With --stall it
reads each request and never answers: a collector that takes the connection and hangs.

Protobuf is decoded by hand (the few fields read here), so it needs nothing beyond Python's standard library.
"""
import json
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

port = int(sys.argv[1])
counts_path = sys.argv[2]
stall = "--stall" in sys.argv[3:]
lock = threading.Lock()
counts = {"requests": 0, "spans": 0, "by_kind": {}, "process_message_ids": 0, "process_duplicates": 0}
seen_ids = set()


def varint(data, offset):
    result = shift = 0
    while True:
        byte = data[offset]
        offset += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, offset
        shift += 7


def fields(data):
    """(field number, wire type, value) of a message; length-delimited values are memoryviews."""
    offset, end = 0, len(data)
    while offset < end:
        key, offset = varint(data, offset)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, offset = varint(data, offset)
        elif wire == 1:
            value, offset = data[offset:offset + 8], offset + 8
        elif wire == 2:
            length, offset = varint(data, offset)
            value, offset = data[offset:offset + length], offset + length
        elif wire == 5:
            value, offset = data[offset:offset + 4], offset + 4
        else:
            raise ValueError(f"wire type {wire}")
        yield number, wire, value


def message_id(attributes):
    for key_value in attributes:
        key = value = None
        for number, _, field in fields(key_value):
            if number == 1:
                key = bytes(field)
            elif number == 2:
                value = field
        if key == b"messaging.message.id" and value is not None:
            for number, _, field in fields(value):
                if number == 1:  # AnyValue.string_value
                    return bytes(field)
    return None


def count(body):
    spans, kinds, ids = 0, {}, []
    for number, _, resource_spans in fields(memoryview(body)):
        if number != 1:  # ExportTraceServiceRequest.resource_spans
            continue
        for number, _, scope_spans in fields(resource_spans):
            if number != 2:  # ResourceSpans.scope_spans
                continue
            for number, _, span in fields(scope_spans):
                if number != 2:  # ScopeSpans.spans
                    continue
                spans += 1
                name, attributes = b"", []
                for field_number, _, value in fields(span):
                    if field_number == 5:  # Span.name
                        name = bytes(value)
                    elif field_number == 9:  # Span.attributes
                        attributes.append(value)
                kind = name.split(b" ", 1)[0].decode()
                kinds[kind] = kinds.get(kind, 0) + 1
                if kind == "process":
                    ids.append(message_id(attributes))
    return spans, kinds, ids


def write_counts():
    with lock:
        snapshot = json.dumps(counts)
    with open(counts_path + ".tmp", "w") as file:
        file.write(snapshot)
    import os
    os.replace(counts_path + ".tmp", counts_path)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *arguments):
        pass

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length)
        with lock:
            counts["requests"] += 1
        if stall:
            threading.Event().wait()  # never answers; the client gives up and closes
            return
        spans, kinds, ids = count(body)
        with lock:
            counts["spans"] += spans
            for kind, number in kinds.items():
                counts["by_kind"][kind] = counts["by_kind"].get(kind, 0) + number
            for identifier in ids:
                if identifier in seen_ids:
                    counts["process_duplicates"] += 1
                else:
                    seen_ids.add(identifier)
            counts["process_message_ids"] = len(seen_ids)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()
        write_counts()


server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
server.daemon_threads = True


def stop(*_):
    write_counts()
    sys.exit(0)


signal.signal(signal.SIGTERM, stop)
write_counts()
server.serve_forever()
