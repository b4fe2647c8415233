// A tiny script, pinned with a Subresource Integrity digest.
export function greet(name) {
  return `hello, ${name}`;
}
