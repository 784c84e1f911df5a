//! `kplane-intent-api`: the intent-api service on its own (see `kplane intent-api` for the CLI form).

fn main() -> std::process::ExitCode {
    kplane_runtime::service_main_with_bus(kplane_intent_api::NAME, kplane_intent_api::run)
}
