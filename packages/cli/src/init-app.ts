/** What `payhook init` writes for one framework or runtime. */
export interface AppTemplate {
  title: string;
  /** The framework's own packages and ranges in the app's package.json, beside @payhook/*. */
  dependencies: Record<string, string>;
  devDependencies?: Record<string, string>;
  scripts: Record<string, string>;
  /** How to start it, for its README and the command's last lines. */
  start: string;
  /** ALLOWED_IPS locally: what `payhook serve` prints, or '*' where no address can be trusted. */
  localIps: string;
  /** Its files by path: the receiver on /webhooks, listening on PORT. */
  files: Record<string, string>;
}
