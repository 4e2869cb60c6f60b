"""gRPC server reflection, both versions: ``grpc.reflection.v1`` and ``v1alpha``.

grpcio-reflection 1.85 implements only ``v1alpha`` (grpc/grpc#38576 asks for v1), while
newer tools (grpc-java's reflection client, recent grpcurl and buf curl) ask for
``v1`` first. The two protocols are the same messages under another package name —
``grpc/reflection/v1/reflection.proto`` is v1alpha's file with the package renamed,
every field number and type unchanged — so one servicer answers both: v1 requests
decode as v1alpha messages and v1alpha answers encode as v1 ones.
"""

from collections.abc import Iterable

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool
from grpc_reflection.v1alpha import reflection, reflection_pb2

V1_SERVICE_NAME = "grpc.reflection.v1.ServerReflection"
V1ALPHA_SERVICE_NAME: str = reflection.SERVICE_NAME
_V1_FILE = "grpc/reflection/v1/reflection.proto"


def _describe_v1(pool: descriptor_pool.DescriptorPool) -> None:
    """Put v1's file into ``pool`` (v1alpha's, renamed), so reflection can describe it."""
    try:
        pool.FindFileByName(_V1_FILE)
        return
    except KeyError:
        pass
    proto = descriptor_pb2.FileDescriptorProto()
    reflection_pb2.DESCRIPTOR.CopyToProto(proto)
    old_prefix = f".{proto.package}."
    proto.name, proto.package = _V1_FILE, "grpc.reflection.v1"
    for message in proto.message_type:
        for field in message.field:
            if field.type_name.startswith(old_prefix):
                field.type_name = ".grpc.reflection.v1." + field.type_name[len(old_prefix) :]
    for service in proto.service:
        for method in service.method:
            for attr in ("input_type", "output_type"):
                name = getattr(method, attr)
                setattr(method, attr, ".grpc.reflection.v1." + name[len(old_prefix) :])
    pool.Add(proto)


def enable_reflection(server: grpc.aio.Server, service_names: Iterable[str]) -> None:
    """Serve reflection v1 and v1alpha for ``service_names`` (and for themselves)."""
    _describe_v1(descriptor_pool.Default())
    names = (*service_names, V1_SERVICE_NAME, V1ALPHA_SERVICE_NAME)
    servicer = reflection.aio.ReflectionServicer(names)
    for service_name in (V1_SERVICE_NAME, V1ALPHA_SERVICE_NAME):
        handler = grpc.stream_stream_rpc_method_handler(
            servicer.ServerReflectionInfo,
            request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
            response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString,
        )
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(service_name, {"ServerReflectionInfo": handler}),)
        )
