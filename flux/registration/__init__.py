"""Static registration: workflows and their options read from source, never run.

``static``: one module's decorators; ``bundle``: every module of a bundle;
``requirements``: what a bundle declares it needs, as package constraints.
Used by the server (it reads what it is sent) and by the client (``flux workflow
check``-style early errors); neither runs a line of the user's code.
"""

from flux.registration.bundle import BundleReading, module_name, read_bundle
from flux.registration.static import StaticError, read_source

__all__ = ["BundleReading", "StaticError", "module_name", "read_bundle", "read_source"]
