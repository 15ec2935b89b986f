#include "common/grpc_server.h"

#include "absl/strings/str_format.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"

namespace tandem {

std::string HostPort(const std::string& host, int port) {
  return absl::StrFormat(host.find(':') != std::string::npos ? "[%s]:%d" : "%s:%d", host, port);
}

absl::StatusOr<GrpcServer> StartGrpcServer(const std::string& host, int port,
                                           const std::vector<grpc::Service*>& services,
                                           const std::vector<std::string>& health_names) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int bound_port = 0;
  const std::string listen = HostPort(host, port);
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &bound_port);
  for (grpc::Service* service : services) builder.RegisterService(service);
  builder.SetMaxReceiveMessageSize(kMaxGrpcMessageBytes);
  builder.SetMaxSendMessageSize(kMaxGrpcMessageBytes);
  GrpcServer out;
  out.server = builder.BuildAndStart();
  if (out.server == nullptr || bound_port == 0) {
    return absl::UnavailableError(absl::StrFormat("cannot listen on %s", listen));
  }
  grpc::HealthCheckServiceInterface* health = out.server->GetHealthCheckService();
  health->SetServingStatus(true);
  for (const std::string& name : health_names) health->SetServingStatus(name, true);
  out.address = HostPort(host, bound_port);
  return out;
}

}  // namespace tandem
