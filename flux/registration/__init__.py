"""Static registration: workflows and their options read from source, never run.

``static``: one module's decorators; ``bundle``: every module of a bundle;
``requirements``: what a bundle declares it needs, as package constraints.
Used by the server on what it is sent; no line of the user's code runs, on the
client or on the server.
"""

from flux.registration.bundle import BundleReading, module_name, read_bundle
from flux.registration.static import StaticError, read_source

__all__ = ["BundleReading", "StaticError", "module_name", "read_bundle", "read_source"]
