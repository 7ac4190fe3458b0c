"""The page tgfn_drivers/webgpu.py serves to headless Chromium: it opens a WebGPU device and then asks the
Python side for work in a loop (a long poll, POST /work), running each batch of commands in order and
posting the replies with its next request. Commands:
  hello                          -> the adapter's description and limits
  compile {id, src, entry, bindings: ["storage" | "read-only-storage", ...]}
                                 -> {ms}: the shader module and the pipeline, or {error}
  alloc {id, size}, free {id}, write {id, data (base64)}
  launch {pipe, bufs: [ids], params: [u32 words], groups: [x, y, z]}: a buffer bound both read-only and
                                 writable (a donated input's memory reused for the output) is read through a copy
  copy {src, src_offset, dst, dst_offset, size}: a region of one buffer into another, queued like a launch
  read {id, size}                -> {data (base64)}: waits for every launch before it
  sync                           -> {}: waits for every launch
Validation errors raised by the device between replies come back with the next reply (`errors`)."""

PAGE = """<!doctype html><meta charset="utf-8"><title>tgfn WebGPU</title><script>
const bufs = new Map(), pipes = new Map(), errors = [];
let device = null;

function fromBase64(text) { return Uint8Array.from(atob(text), c => c.charCodeAt(0)); }
function toBase64(bytes) {
  let text = "";
  for (let i = 0; i < bytes.length; i += 32768) text += String.fromCharCode.apply(null, bytes.subarray(i, i + 32768));
  return btoa(text);
}

async function hello() {
  if (!navigator.gpu) return {error: "this Chromium has no navigator.gpu (WebGPU is disabled)"};
  const adapter = await navigator.gpu.requestAdapter();
  if (!adapter) return {error: "navigator.gpu.requestAdapter() found no adapter"};
  const want = ["maxStorageBuffersPerShaderStage", "maxStorageBufferBindingSize", "maxBufferSize",
                "maxComputeWorkgroupsPerDimension"];
  const requiredLimits = Object.fromEntries(want.map(k => [k, adapter.limits[k]]));
  device = await adapter.requestDevice({requiredLimits});
  device.addEventListener("uncapturederror", e => errors.push(e.error.message));
  device.lost.then(info => errors.push("the WebGPU device was lost: " + info.message));
  const i = adapter.info || {};
  return {adapter: [i.vendor, i.architecture, i.device, i.description].filter(x => x).join(" "), limits: requiredLimits};
}

async function compile(cmd) {
  const t0 = performance.now();
  const module = device.createShaderModule({code: cmd.src});
  const messages = (await module.getCompilationInfo()).messages.filter(m => m.type === "error");
  if (messages.length) return {error: messages.map(m => `line ${m.lineNum}:${m.linePos}: ${m.message}`).join("\\n")};
  const layout = device.createBindGroupLayout({entries: cmd.bindings.map((type, binding) =>
    ({binding, visibility: GPUShaderStage.COMPUTE, buffer: {type}}))});
  try {
    const pipe = await device.createComputePipelineAsync({
      layout: device.createPipelineLayout({bindGroupLayouts: [layout]}), compute: {module, entryPoint: cmd.entry}});
    pipes.set(cmd.id, {pipe, layout, types: cmd.bindings});
  } catch (e) { return {error: String(e.message || e)}; }
  return {ms: performance.now() - t0};
}

function launch(cmd) {
  const {pipe, layout, types} = pipes.get(cmd.pipe);
  const encoder = device.createCommandEncoder(), scratch = [];
  // WebGPU forbids binding a buffer as writable and as read-only in one dispatch (an output that reuses a
  // donated input's memory): the read-only binding gets a copy taken just before, which reads the same values
  const written = new Set(cmd.bufs.filter((id, binding) => types[binding] === "storage"));
  const entries = cmd.bufs.map((id, binding) => {
    let buffer = bufs.get(id);
    if (types[binding] !== "storage" && written.has(id)) {
      const copy = device.createBuffer({size: buffer.size, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST});
      encoder.copyBufferToBuffer(buffer, 0, copy, 0, buffer.size);
      scratch.push(copy);
      buffer = copy;
    }
    return {binding, resource: {buffer}};
  });
  if (cmd.params.length) {
    const words = new Uint32Array(cmd.params);
    const params = device.createBuffer({size: words.byteLength, usage: GPUBufferUsage.STORAGE, mappedAtCreation: true});
    new Uint32Array(params.getMappedRange()).set(words);
    params.unmap();
    entries.push({binding: cmd.bufs.length, resource: {buffer: params}});
  }
  const pass = encoder.beginComputePass();
  pass.setPipeline(pipe);
  pass.setBindGroup(0, device.createBindGroup({layout, entries}));
  pass.dispatchWorkgroups(...cmd.groups);
  pass.end();
  device.queue.submit([encoder.finish()]);
  for (const buffer of scratch) buffer.destroy();  // freed once the submitted work is done
}

function copy(cmd) {
  const encoder = device.createCommandEncoder();
  encoder.copyBufferToBuffer(bufs.get(cmd.src), cmd.src_offset, bufs.get(cmd.dst), cmd.dst_offset, cmd.size);
  device.queue.submit([encoder.finish()]);
}

async function read(cmd) {
  const staging = device.createBuffer({size: cmd.size, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST});
  const encoder = device.createCommandEncoder();
  encoder.copyBufferToBuffer(bufs.get(cmd.id), 0, staging, 0, cmd.size);
  device.queue.submit([encoder.finish()]);
  await staging.mapAsync(GPUMapMode.READ);
  const data = toBase64(new Uint8Array(staging.getMappedRange()));
  staging.destroy();
  return {data};
}

async function run(cmd) {
  switch (cmd.op) {
    case "hello": return await hello();
    case "compile": return await compile(cmd);
    case "alloc": bufs.set(cmd.id, device.createBuffer({size: cmd.size,
      usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST})); return null;
    case "free": bufs.get(cmd.id).destroy(); bufs.delete(cmd.id); return null;
    case "write": device.queue.writeBuffer(bufs.get(cmd.id), 0, fromBase64(cmd.data)); return null;
    case "launch": launch(cmd); return null;
    case "copy": copy(cmd); return null;
    case "read": return await read(cmd);
    case "sync": await device.queue.onSubmittedWorkDone(); return {};
  }
  return {error: "unknown command " + cmd.op};
}

(async () => {
  let reply = null;
  for (;;) {
    let batch;
    try {
      batch = await (await fetch("/work", {method: "POST", body: JSON.stringify(reply)})).json();
    } catch (e) { window.close(); return; }  // the Python side is gone
    if (batch.id === null) { reply = null; continue; }
    const results = [];
    for (const cmd of batch.cmds) {
      try { results.push(await run(cmd)); } catch (e) { results.push({error: String(e.message || e)}); }
    }
    reply = {id: batch.id, results, errors: errors.splice(0)};
  }
})();
</script>
"""
