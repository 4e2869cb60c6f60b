"""evald server: the engine, the store, providers, scorers and the gRPC service.

The layers import downward only: ``api`` (gRPC) → application → ``engine`` →
ports (``store``, ``providers``, ``scoring``). Nothing below ``api`` imports grpc.
"""

__version__ = "0.1.0"
