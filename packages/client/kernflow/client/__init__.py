"""kernflow-client: the wire protocol (protobuf + gRPC), remote sessions and discovery."""
