// The proto files under proto/ as @grpc/grpc-js services, loaded as they
// are by @grpc/proto-loader (no code generation): how the gRPC suites
// beside this file (grpc, grpc-tls, envoy) build their clients, with one
// set of loader options instead of a copy in each.
import path from "node:path";
import { fileURLToPath } from "node:url";

import grpc from "@grpc/grpc-js";
import protoLoader from "@grpc/proto-loader";

export const PROTO_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "..", "proto");

// The package tree of file (a path under proto/, e.g.
// "permit/v1/ratelimit.proto"): 64-bit integers as Numbers, defaults
// filled in, the proto's field names; options: more proto-loader options
// (e.g. { enums: String }).
export function loadProto(file, options = {}) {
  const def = protoLoader.loadSync(path.join(PROTO_DIR, file), {
    includeDirs: [PROTO_DIR], longs: Number, defaults: true, keepCase: true, ...options,
  });
  return grpc.loadPackageDefinition(def);
}
