//! `kplane-intent-api`: the intent-api service on its own (see `kplane intent-api` for the CLI
//! form). `kplane-intent-api query-worker DIR BYTES` is the API's query worker.

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [cmd, store_dir, memory] = &args[..]
        && cmd == "query-worker"
    {
        let Ok(memory) = memory.parse() else {
            eprintln!("kplane-intent-api query-worker: {memory:?} is not a byte count");
            return std::process::ExitCode::from(2);
        };
        return kplane_intent_api::query_worker::worker_main(store_dir.as_ref(), memory);
    }
    kplane_runtime::service_main_with_bus(kplane_intent_api::NAME, kplane_intent_api::run)
}
