//! `kplane-stream-processor`: the stream-processor service on its own (see `kplane stream-processor` for the CLI form).

fn main() -> std::process::ExitCode {
    kplane_runtime::service_main_with_bus(
        kplane_stream_processor::NAME,
        kplane_stream_processor::run,
    )
}
