// A server interceptor that answers a request gRPC could not parse with
// INVALID_ARGUMENT naming the method, instead of the UNIMPLEMENTED with an
// empty message that gRPC C++'s callback API sends for it (its handlers
// finish every call whose request failed to deserialize that way), which
// reads as "this server has no such method". Installed on every tandem gRPC
// server by StartGrpcServer.
//
// Thread-safety: one interceptor per call, as gRPC makes them.
#ifndef TANDEM_COMMON_GRPC_GRPC_PARSE_ERRORS_H_
#define TANDEM_COMMON_GRPC_GRPC_PARSE_ERRORS_H_

#include <memory>
#include <vector>

#include "grpcpp/support/server_interceptor.h"

namespace tandem {

class ParseErrorInterceptorFactory
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_GRPC_GRPC_PARSE_ERRORS_H_
