"""A stock Python grpcio client against a running cuzk daemon, as a user of another language
would write one: no channel options, stubs generated from crates/daemon/proto by grpcio-tools.

Driven by tests/stock_client.rs, which starts the daemon on its default unix socket and passes
in the environment: CUZK_SOCKET, CUZK_PROTO_DIR, CUZK_WITNESS, CUZK_PK, CUZK_R1CS, CUZK_OUT.
Checks health, server reflection v1 and v1alpha, Status, and proves (the witness streamed in
chunks); writes the proof and public inputs to CUZK_OUT/proof and CUZK_OUT/public.
"""

import os
import sys
import tempfile

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2
from grpc_tools import protoc
import grpc_tools

env = os.environ
stubs = tempfile.mkdtemp(prefix="cuzk-stubs-")
well_known = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
rc = protoc.main(
    [
        "protoc",
        f"-I{env['CUZK_PROTO_DIR']}",
        f"-I{well_known}",
        f"--python_out={stubs}",
        f"--grpc_python_out={stubs}",
        "cuzk/v1/cuzk.proto",
    ]
)
if rc != 0:
    sys.exit(f"protoc failed ({rc})")
sys.path.insert(0, stubs)
from cuzk.v1 import cuzk_pb2, cuzk_pb2_grpc  # noqa: E402

channel = grpc.insecure_channel("unix:" + env["CUZK_SOCKET"])

health = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=30)
assert health.status == health_pb2.HealthCheckResponse.SERVING, health
print("health: SERVING")

# v1 and v1alpha have the same messages under two package names; grpcio-reflection ships
# only v1alpha's, so v1 is called by its path with them.
for version in ("v1", "v1alpha"):
    call = channel.stream_stream(
        f"/grpc.reflection.{version}.ServerReflection/ServerReflectionInfo",
        request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
        response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
    )
    answers = list(call(iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=30))
    names = sorted(s.name for s in answers[0].list_services_response.service)
    for want in ("cuzk.v1.Prover", "grpc.health.v1.Health", f"grpc.reflection.{version}.ServerReflection"):
        assert want in names, (version, names)
    print(f"reflection {version}: {', '.join(names)}")

prover = cuzk_pb2_grpc.ProverStub(channel)
status = prover.Status(cuzk_pb2.StatusRequest(), timeout=30)
assert len(status.devices) >= 1, status
print(f"status: {len(status.devices)} device(s), backend {status.devices[0].name}")

prover.LoadKey(
    cuzk_pb2.LoadKeyRequest(key_id="k", pk_path=env["CUZK_PK"], r1cs_path=env["CUZK_R1CS"]),
    timeout=300,
)
with open(env["CUZK_WITNESS"], "rb") as f:
    witness = f.read()


def submission():
    yield cuzk_pb2.SubmitRequest(
        header=cuzk_pb2.SubmitHeader(key_id="k", witness_size=len(witness))
    )
    chunk = 1 << 20
    for i in range(0, len(witness), chunk):
        yield cuzk_pb2.SubmitRequest(chunk=witness[i : i + chunk])


proof = prover.Prove(submission(), timeout=600)
assert proof.state == cuzk_pb2.JOB_STATE_DONE, proof
with open(os.path.join(env["CUZK_OUT"], "proof"), "wb") as f:
    f.write(proof.proof)
with open(os.path.join(env["CUZK_OUT"], "public"), "wb") as f:
    f.write(proof.public_inputs)
print(f"proof: {len(proof.proof)} bytes in {proof.timings.run_s:.3f} s")
