"""Optional OpenTelemetry tracing (``pip install 'flux-engine[otel]'``, docs/tracing.md).

Off unless configured: ``OTEL_EXPORTER_OTLP_ENDPOINT`` or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (OTLP over HTTP, the standard variables),
``FLUX_TRACING=console`` (spans printed to stderr) or ``FLUX_TRACING=file:PATH``
(one JSON object a line, appended: what the tests read across processes).
``FLUX_TRACING=off`` or ``OTEL_SDK_DISABLED=true`` turns it off whatever else is set.

This is the only module that imports ``opentelemetry``, and only once tracing is
configured: off, ``span`` is a shared no-op context manager and nothing is imported.
Spans cross processes as W3C ``traceparent`` strings (the execution row, the claim
payload, the job a child is sent).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import threading
from typing import Any, ContextManager, Iterator

ENV = "FLUX_TRACING"
OTLP_ENV = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
_OFF = {"off", "none", "0", "false"}
_NOOP = contextlib.nullcontext()
_set_up = threading.Lock()
_provider: Any = None


def _setting() -> str | None:
    """What tracing exports to: "otlp", "console", "file:PATH", or None (off)."""
    flux = os.environ.get(ENV, "").strip()
    if flux.lower() in _OFF or os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    if flux:
        return flux
    return "otlp" if any(os.environ.get(name) for name in OTLP_ENV) else None


@functools.cache
def _importable() -> bool:
    try:
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError:
        return False
    return True


def enabled() -> bool:
    """Tracing is configured and the ``otel`` extra is installed."""
    return _setting() is not None and _importable()


def setup(service_name: str) -> bool:
    """Install a TracerProvider exporting as configured, once per process (a later
    call is a no-op, as is one when tracing is off). Returns whether tracing is on."""
    global _provider
    setting = _setting()
    if setting is None or not _importable():
        return False
    with _set_up:
        if _provider is not None:
            return True
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SimpleSpanProcessor

        provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
        if setting.startswith("file:"):  # written at end(): several processes append to one file
            provider.add_span_processor(SimpleSpanProcessor(_file_exporter(setting[len("file:") :])))
        elif setting == "console":
            provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
        else:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        trace.set_tracer_provider(provider)
        _provider = provider
        return True


def span(name: str, attributes: dict[str, Any] | None = None, parent: str | None = None) -> ContextManager[Any]:
    """A span around a block, current within it, child of ``parent`` (a ``traceparent``)
    if given, else of the current span. An exception through it marks it failed.
    Off: a no-op yielding None."""
    if not enabled():
        return _NOOP
    return _span(name, attributes, parent)


@contextlib.contextmanager
def _span(name: str, attributes: dict[str, Any] | None, parent: str | None) -> Iterator[Any]:
    from opentelemetry import trace

    attributes = {key: value for key, value in (attributes or {}).items() if value is not None}
    with trace.get_tracer("flux").start_as_current_span(
        name, context=_context(parent), attributes=attributes
    ) as current:
        yield current


def parented(traceparent: str | None) -> ContextManager[Any]:
    """Make ``traceparent`` the current span's context within the block (for code that
    opens spans of its own, and asyncio tasks created there, which copy it)."""
    if not traceparent or not enabled():
        return _NOOP
    return _parented(traceparent)


@contextlib.contextmanager
def _parented(traceparent: str) -> Iterator[None]:
    from opentelemetry import context

    token = context.attach(_context(traceparent))
    try:
        yield
    finally:
        context.detach(token)


def current_traceparent() -> str | None:
    """The W3C ``traceparent`` of the current span, or None (off, or no span)."""
    if not enabled():
        return None
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier)
    return carrier.get("traceparent")


def flush(timeout: float = 5.0) -> None:
    """Export the spans that ended so far (a process about to exit, a child about to
    report its attempt closed)."""
    if _provider is not None:
        _provider.force_flush(int(timeout * 1000))


def _context(traceparent: str | None) -> Any:
    if not traceparent:
        return None
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    return TraceContextTextMapPropagator().extract({"traceparent": traceparent})


def _file_exporter(path: str) -> Any:
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    class JsonLinesExporter(SpanExporter):
        """Each span as one JSON line, appended with a single write (O_APPEND), so the
        server, workers and children can share one file."""

        def __init__(self) -> None:
            self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

        def export(self, spans) -> SpanExportResult:  # noqa: ANN001 - Sequence[ReadableSpan]
            lines = "".join(json.dumps(_as_dict(s), default=str) + "\n" for s in spans)
            os.write(self.fd, lines.encode())
            return SpanExportResult.SUCCESS

        def shutdown(self) -> None:
            with contextlib.suppress(OSError):
                os.close(self.fd)

    return JsonLinesExporter()


def _as_dict(span: Any) -> dict[str, Any]:
    return {
        "name": span.name,
        "trace_id": f"{span.context.trace_id:032x}",
        "span_id": f"{span.context.span_id:016x}",
        "parent_id": f"{span.parent.span_id:016x}" if span.parent else None,
        "service": span.resource.attributes.get("service.name"),
        "pid": os.getpid(),
        "attributes": dict(span.attributes or {}),
        "status": span.status.status_code.name,
        "start": span.start_time,
        "end": span.end_time,
    }
