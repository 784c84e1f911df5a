//! Training and scoring cost, measured on real windows (`kplane eval knowledge` prints both):
//! a window set is stretched to the length asked for by repeating it with shifted end times.

use std::time::Instant;

use crate::engine::{Engine, EngineConfig};
use crate::features::Window;

/// `n` windows built by repeating `base` (oldest first), each `window_ns` after the last.
pub fn repeat(base: &[Window], n: usize, window_ns: i64) -> Vec<Window> {
    if base.is_empty() {
        return Vec::new();
    }
    (0..n)
        .map(|i| {
            let mut w = base[i % base.len()].clone();
            w.shift((i as i64 + 1) * window_ns - w.end_ns);
            w
        })
        .collect()
}

/// Trains a fresh engine (its state in `cfg.state_dir`) on `windows`, as a cold start from
/// history does: the engine and the seconds the training took (one thread).
pub fn train(
    cfg: EngineConfig,
    windows: Vec<Window>,
) -> Result<(Engine, f64), crate::KnowledgeError> {
    let mut e = Engine::new(cfg)?;
    e.seed_history(windows);
    let seconds = e
        .registry()
        .history
        .last()
        .filter(|t| t.ok)
        .map(|t| t.seconds)
        .ok_or_else(|| {
            crate::KnowledgeError::Training(format!("no model trained: {}", e.registry().message))
        })?;
    Ok((e, seconds))
}

/// Scores `windows` with `engine` (features, models, episodes, forecasts — the live path):
/// entity-windows scored and the seconds it took.
pub fn score(engine: &mut Engine, windows: &[Window]) -> (u64, f64) {
    let before = engine.counts.entity_windows;
    let t = Instant::now();
    for w in windows {
        std::hint::black_box(engine.window(w));
    }
    (
        engine.counts.entity_windows - before,
        t.elapsed().as_secs_f64(),
    )
}
