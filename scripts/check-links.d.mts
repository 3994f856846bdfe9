/** GitHub's anchor for a heading's text, before a repeated heading's `-1`, `-2`... */
export declare function slug(text: string): string;

/** Every anchor a Markdown text defines: its headings' (made unique as GitHub does) and HTML ids. */
export declare function anchorsOf(text: string): Set<string>;

/** The link targets of a Markdown text (inline links and definitions), with their line numbers. */
export declare function linksOf(text: string): { target: string; line: number }[];

/** The Markdown files under `dir`, recursively, without dependencies, builds and Git's folder. */
export declare function markdownFiles(dir: string): string[];

/**
 * What is wrong with the relative links of the Markdown under `base` (the repository by default):
 * a file or folder that does not exist, an anchor no heading of the linked file makes; one line
 * each, empty when nothing is.
 */
export declare function linkProblems(base?: string): string[];
