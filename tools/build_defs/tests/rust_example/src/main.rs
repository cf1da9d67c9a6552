fn main() {
    let n: u32 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(10);
    println!("triangle({n}) = {}", rule_example::triangle(n));
}
