/** Inclusive code point ranges shown escaped (tests/screen/shown_text.json). */
export declare const ESCAPED: ReadonlyArray<readonly [number, number]>;
/** True when `c` (one code point) must not be shown as it is. */
export declare function hiddenOrControl(c: string): boolean;
/** `text` as a screen shows it: `\` as `\\`, controls, bidi and invisible characters as `\u{h}`. */
export declare function shownText(text: string): string;
/** A JSON value's text with every control, bidi and invisible character JSON leaves raw as `\u{h}`. */
export declare function shownJson(value: unknown): string;
/** Each line through `shownText`, the line breaks kept. */
export declare function shownLines(text: string): string;
