"""Registers the servicer with deserializers that never raise.

The generated ``add_EvaluationServiceServicer_to_server`` decodes requests with
``FromString``: a request protobuf cannot parse (corrupt bytes, a string field that is
not UTF-8) raises inside grpc, before our error mapping, and the client gets UNKNOWN
with the exception text. Here a bad request decodes to ``UndecodableRequest`` instead,
which the handlers in ``_handlers`` answer with INVALID_ARGUMENT. The handlers are
built from the service descriptor, so a new RPC needs no change here.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf import message, message_factory

from evald.v1 import service_pb2

SERVICE = service_pb2.DESCRIPTOR.services_by_name["EvaluationService"]


@dataclass(frozen=True, slots=True)
class UndecodableRequest:
    """Stands in for a request message whose bytes did not parse."""

    message_type: str
    problem: str


def _deserializer(message_class: type[message.Message]) -> Callable[[bytes], Any]:
    def deserialize(data: bytes) -> Any:
        try:
            return message_class.FromString(data)
        except message.DecodeError as exc:
            return UndecodableRequest(message_class.DESCRIPTOR.full_name, str(exc))

    return deserialize


_HANDLER_FACTORIES = {
    (False, False): grpc.unary_unary_rpc_method_handler,
    (False, True): grpc.unary_stream_rpc_method_handler,
    (True, False): grpc.stream_unary_rpc_method_handler,
    (True, True): grpc.stream_stream_rpc_method_handler,
}


def add_evaluation_service(servicer: object, server: grpc.aio.Server) -> None:
    """Register every RPC of ``evald.v1.EvaluationService`` on ``server``."""
    handlers = {}
    for method in SERVICE.methods:
        request_class = message_factory.GetMessageClass(method.input_type)
        response_class = message_factory.GetMessageClass(method.output_type)
        factory = _HANDLER_FACTORIES[(method.client_streaming, method.server_streaming)]
        handlers[method.name] = factory(
            getattr(servicer, method.name),
            request_deserializer=_deserializer(request_class),
            response_serializer=response_class.SerializeToString,
        )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(SERVICE.full_name, handlers),)
    )
    server.add_registered_method_handlers(SERVICE.full_name, handlers)
