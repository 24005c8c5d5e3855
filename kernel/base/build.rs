//! Passes the name of the kernel image being built (`REEF_IMAGE`) to `mm::image`.
fn main() {
    println!("cargo:rerun-if-env-changed=REEF_IMAGE");
    let image = std::env::var("REEF_IMAGE").unwrap_or_else(|_| "full".into());
    println!("cargo:rustc-env=REEF_IMAGE={image}");
}
