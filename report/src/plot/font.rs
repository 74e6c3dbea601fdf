//! The embedded font. DejaVu Sans (Bitstream Vera license, see
//! report/assets/DejaVuSans-LICENSE.txt) from Debian's fonts-dejavu-core 2.37,
//! registered with plotters' ab_glyph text renderer as `sans-serif`, so plots need
//! no fontconfig or FreeType on the machine that draws them.

use std::sync::Once;

use plotters::style::FontStyle;

static FONT: &[u8] = include_bytes!("../../assets/DejaVuSans.ttf");
static REGISTER: Once = Once::new();

/// The family name plots use.
pub const FAMILY: &str = "sans-serif";

/// Register the font once per process (idempotent).
pub fn ensure() {
    REGISTER.call_once(|| {
        // The bytes are a valid TrueType file checked in with the crate; a failure
        // here would be a build defect, caught by every plot test.
        if plotters::style::register_font(FAMILY, FontStyle::Normal, FONT).is_err() {
            eprintln!("crossbench-report: the embedded DejaVu Sans did not load; plot text will be missing");
        }
    });
}
