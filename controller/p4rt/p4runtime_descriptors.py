"""Print the P4Runtime protobuf definitions as a serialized FileDescriptorSet.

The official definitions are taken from the PyPI `p4runtime` package, which
ships them compiled into its `*_pb2` modules; build.rs feeds the result to
prost/tonic code generation, so no .proto file is copied into this project.
"""

import sys

from google.protobuf import descriptor_pb2

try:
    from p4.v1 import p4runtime_pb2
except ImportError as err:  # pragma: no cover - reported by build.rs
    sys.exit(f"cannot import p4.v1.p4runtime_pb2 ({err}); pip install p4runtime==1.4.1")


def add_with_dependencies(file_descriptor, seen, out):
    """Append a file after everything it imports (protoc's own order)."""
    if file_descriptor.name in seen:
        return
    for dependency in file_descriptor.dependencies:
        add_with_dependencies(dependency, seen, out)
    seen.add(file_descriptor.name)
    out.file.append(descriptor_pb2.FileDescriptorProto.FromString(file_descriptor.serialized_pb))


descriptor_set = descriptor_pb2.FileDescriptorSet()
add_with_dependencies(p4runtime_pb2.DESCRIPTOR, set(), descriptor_set)
sys.stdout.buffer.write(descriptor_set.SerializeToString())
