// An in-memory disk, and the agent's file tools on top of it: reads are observed (`fs/observed`),
// writes and edits pass the `fs/write-intent` / `fs/edit-intent` gate, whose last word is the
// read-before-edit policy: an existing file may change only if the agent read its current version.

/** The disk as every actor sees it. Each write makes a new version. */
export class MemoryDisk {
  #files = new Map();
  #versions = 0;

  constructor(files = {}) {
    for (const path of Object.keys(files).sort()) this.put(path, files[path]);
  }

  /** Writes a file (no gate: this is how another process changes it). Returns its version. */
  put(path, content) {
    const version = ++this.#versions;
    this.#files.set(path, { content, version });
    return version;
  }

  get(path) {
    return this.#files.get(path);
  }
}

/** The agent's file tools. `intents` is the gate's waterfall: `(intent, next) => {allow, reason?}`. */
export class AgentFs {
  #seen = new Map();

  constructor({ disk, session, intents, actor = 'agent' }) {
    this.disk = disk;
    this.session = session;
    this.intents = intents;
    this.actor = actor;
  }

  #observed(target, state) {
    this.session.append('fs/observed', { target, state, actor: this.actor });
  }

  read(path) {
    const file = this.disk.get(path);
    this.#observed(path, file ? { kind: 'present', version: file.version } : { kind: 'absent' });
    if (!file) throw new Error(`no such file: ${path}`);
    this.#seen.set(path, file.version);
    return file.content;
  }

  async write(path, content, exec) {
    await this.#gate('write', path, exec);
    this.#commit(path, content);
  }

  async edit(path, old, replacement, exec) {
    await this.#gate('edit', path, exec);
    const current = this.disk.get(path);
    if (!current.content.includes(old)) throw new Error(`text to replace not found in ${path}`);
    this.#commit(path, current.content.replace(old, replacement));
  }

  async #gate(kind, target, exec) {
    const intent = { kind, target, version: this.disk.get(target)?.version, actor: this.actor, exec };
    const verdict = await this.intents.run([intent], async () => this.#readBeforeEdit(intent));
    if (!verdict?.allow) throw new Error(verdict?.reason ?? `fs/${kind}-intent refused: ${target}`);
  }

  #readBeforeEdit({ kind, target, version }) {
    const refuse = (why) => ({ allow: false, reason: `fs/${kind}-intent refused: ${target} ${why}` });
    if (version === undefined) return kind === 'edit' ? refuse('does not exist') : { allow: true };
    const seen = this.#seen.get(target);
    if (seen === undefined) return refuse('has not been read');
    if (seen !== version) return refuse('changed since it was read');
    return { allow: true };
  }

  #commit(path, content) {
    const version = this.disk.put(path, content);
    this.#seen.set(path, version);
    this.#observed(path, { kind: 'present', version });
  }
}
