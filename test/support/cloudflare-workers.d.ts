// The few Workers types the README's Worker snippets use, for their type check (a Worker's own
// project has them from @cloudflare/workers-types): the `cloudflare:workers` module's
// DurableObject base class, with the storage calls the snippets make.

/** A Durable Object's transactional storage (the calls the snippets make). */
export interface DurableObjectStorage {
  get<T = unknown>(key: string): Promise<T | undefined>;
  put<T>(key: string, value: T): Promise<void>;
  delete(key: string): Promise<boolean>;
  list<T = unknown>(options?: { prefix?: string }): Promise<Map<string, T>>;
}

/** What a Durable Object is given: its storage. */
export interface DurableObjectState {
  readonly storage: DurableObjectStorage;
}

/** The base class of a Durable Object whose methods are called over RPC. */
export declare abstract class DurableObject<Env = unknown> {
  protected readonly ctx: DurableObjectState;
  protected readonly env: Env;
  constructor(ctx: DurableObjectState, env: Env);
}
