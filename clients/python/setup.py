"""Build hook: generate the NDSP bindings from the repository's .proto file.

The bindings are never committed; every build runs grpcio-tools' protoc on
proto/ndsp/v1/ndsp.proto (of the checkout, or the copy an sdist carries, or
$FORESIGHT_NDSP_PROTO) into foresight_ndsp/_pb, so the client always speaks
the protocol of the tree it was built from.
"""

import os
import re
import shutil
import tempfile
from pathlib import Path

from setuptools import setup
from setuptools.command.sdist import sdist

HERE = Path(__file__).resolve().parent
PROTO_REL = Path("proto/ndsp/v1/ndsp.proto")
GEN_PACKAGE = "foresight_ndsp._pb"


def find_proto() -> Path:
    """The NDSP .proto this build uses, with a clear error when there is none."""
    env = os.environ.get("FORESIGHT_NDSP_PROTO")
    candidates = [Path(env)] if env else [HERE / PROTO_REL, HERE.parent.parent / PROTO_REL]
    for c in candidates:
        if c.is_file():
            return c
    raise SystemExit(
        "foresight-ndsp: cannot find the NDSP protocol file; looked at "
        + ", ".join(str(c) for c in candidates)
        + " (build from the Foresight checkout, or set FORESIGHT_NDSP_PROTO)"
    )


def generate(out_root: Path) -> None:
    """Run protoc (from grpcio-tools) so that foresight_ndsp/_pb holds the bindings."""
    import grpc_tools
    from grpc_tools import protoc

    proto = find_proto()
    pkg_dir = out_root / "foresight_ndsp" / "_pb"
    pkg_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        # Place the file under the package path so the generated gRPC stub
        # imports `foresight_ndsp._pb.ndsp_pb2` rather than a top-level module.
        staged = Path(tmp) / "foresight_ndsp" / "_pb" / "ndsp.proto"
        staged.parent.mkdir(parents=True)
        shutil.copyfile(proto, staged)
        include = Path(grpc_tools.__file__).parent / "_proto"
        args = [
            "grpc_tools.protoc",
            f"-I{tmp}",
            f"-I{include}",
            f"--python_out={out_root}",
            f"--pyi_out={out_root}",
            f"--grpc_python_out={out_root}",
            str(staged),
        ]
        if protoc.main(args) != 0:
            raise SystemExit(f"foresight-ndsp: protoc failed on {proto}")
    (pkg_dir / "__init__.py").write_text(
        f'"""NDSP bindings generated at build time from {PROTO_REL} (not committed)."""\n'
    )


class SdistWithProto(sdist):
    """sdist that carries the .proto, so a wheel can be built from it alone."""

    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        target = Path(base_dir) / PROTO_REL
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(find_proto(), target)


def runtime_requirements() -> list:
    """grpcio/protobuf at least as new as the generated code, which checks both
    at import time (its header names the protobuf version of the generator)."""
    from importlib.metadata import version

    gen = (HERE / "src" / "foresight_ndsp" / "_pb" / "ndsp_pb2.py").read_text()
    match = re.search(r"^# Protobuf Python Version: (\d+)\.(\d+)", gen, re.M)
    pb = f"protobuf>={match.group(1)}.{match.group(2)}" if match else "protobuf"
    return [f"grpcio>={version('grpcio-tools')}", pb]


# Every setuptools step (egg_info lists the packages, build_py copies them,
# an editable install points at them) needs the bindings in place first.
generate(HERE / "src")

setup(
    package_dir={"": "src"},
    packages=["foresight_ndsp", "foresight_ndsp.jax", GEN_PACKAGE],
    package_data={GEN_PACKAGE: ["*.pyi"], "foresight_ndsp": ["py.typed"]},
    install_requires=runtime_requirements(),
    cmdclass={"sdist": SdistWithProto},
)
